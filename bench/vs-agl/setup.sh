#!/usr/bin/env bash
# Makes bench/.venvs/agl03: Agent Lightning v0.3 (agentlightning==0.3.0 from PyPI) in its own venv, for the
# side-by-side benchmarks (bench/vs-agl). Idempotent: does nothing when the venv already has that version.
# Prints the venv's path.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=bench/.venvs/agl03
VERSION=0.3.0
if [ -x "$VENV/bin/agl" ] && [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("agentlightning"))' 2>/dev/null)" = "$VERSION" ]; then
  echo "$VENV"
  exit 0
fi
echo "bench/vs-agl: installing agentlightning==$VERSION into $VENV (a few minutes)" >&2
python3.11 -m venv "$VENV"
"$VENV/bin/pip" install -q "agentlightning==$VERSION" >&2
echo "$VENV"
