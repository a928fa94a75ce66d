#!/usr/bin/env bash
# Makes bench/.venvs/agl03: Agent Lightning v0.3 (agentlightning==0.3.0 from PyPI) in its own venv, for the
# side-by-side benchmarks (bench/vs-agl). Idempotent: does nothing when the venv already holds these pins.
# Prints the venv's path.
#
# agentlightning 0.3.0 asks only for litellm>=1.74 and any OpenTelemetry; the releases of its time are pinned, since
# later ones break its LLM proxy: LiteLLM 1.108 no longer hands it the rollout headers of a call, and OpenTelemetry's
# OTLP exporter from 1.40 on ignores the endpoint it sets, so the proxy's spans never reach its store.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=bench/.venvs/agl03
OTEL=1.39.1
PINS="agentlightning==0.3.0 litellm[proxy]==1.80.0 opentelemetry-api==$OTEL opentelemetry-sdk==$OTEL \
opentelemetry-exporter-otlp==$OTEL opentelemetry-exporter-otlp-proto-http==$OTEL opentelemetry-exporter-otlp-proto-grpc==$OTEL \
opentelemetry-exporter-otlp-proto-common==$OTEL opentelemetry-proto==$OTEL opentelemetry-semantic-conventions==0.60b1 \
opentelemetry-instrumentation==0.60b1"
if [ -x "$VENV/bin/agl" ] && [ "$(cat "$VENV/.bench-pins" 2>/dev/null)" = "$PINS" ]; then
  echo "$VENV"
  exit 0
fi
echo "bench/vs-agl: installing agentlightning==0.3.0 into $VENV (a few minutes)" >&2
[ -x "$VENV/bin/python" ] || python3.11 -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q $PINS >&2
echo "$PINS" > "$VENV/.bench-pins"
echo "$VENV"
