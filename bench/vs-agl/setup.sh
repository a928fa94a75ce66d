#!/usr/bin/env bash
# Makes the venvs of Agent Lightning v0.3 (agentlightning==0.3.0 from PyPI) for the side-by-side benchmarks
# (bench/vs-agl), and prints the one asked for: `setup.sh store` (bench/.venvs/agl03: the package with the newest
# releases of what it needs, its store's best showing) or `setup.sh proxy` (bench/.venvs/agl03-proxy). Idempotent:
# does nothing when the venv already holds its pins.
#
# agentlightning 0.3.0 asks only for litellm>=1.74 and any OpenTelemetry; for its LLM proxy the releases of its time
# are pinned, since later ones break it: LiteLLM 1.108 no longer hands it the rollout headers of a call, and
# OpenTelemetry's OTLP exporter from 1.40 on ignores the endpoint it sets, so the proxy's spans never reach its store.
# Those pins also bring older web servers, under which its store server costs more: hence two venvs.
set -euo pipefail
cd "$(dirname "$0")/../.."
OTEL=1.39.1
case "${1:-store}" in
  store)
    VENV=bench/.venvs/agl03
    PINS="agentlightning==0.3.0"
    ;;
  proxy)
    VENV=bench/.venvs/agl03-proxy
    PINS="agentlightning==0.3.0 litellm[proxy]==1.80.0 opentelemetry-api==$OTEL opentelemetry-sdk==$OTEL \
opentelemetry-exporter-otlp==$OTEL opentelemetry-exporter-otlp-proto-http==$OTEL opentelemetry-exporter-otlp-proto-grpc==$OTEL \
opentelemetry-exporter-otlp-proto-common==$OTEL opentelemetry-proto==$OTEL opentelemetry-semantic-conventions==0.60b1 \
opentelemetry-instrumentation==0.60b1"
    ;;
  *)
    echo "usage: setup.sh store|proxy" >&2
    exit 2
    ;;
esac
if [ "$(cat "$VENV/.bench-pins" 2>/dev/null)" = "$PINS" ] && "$VENV/bin/python" -c "import agentlightning" 2>/dev/null; then
  echo "$VENV"
  exit 0
fi
echo "bench/vs-agl: installing $PINS into $VENV (a few minutes)" >&2
[ -x "$VENV/bin/python" ] || python3.11 -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q $PINS >&2
echo "$PINS" > "$VENV/.bench-pins"
echo "$VENV"
