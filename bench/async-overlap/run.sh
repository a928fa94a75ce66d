#!/usr/bin/env bash
# make bench-async: wall time per training step, synchronous against asynchronous (max staleness 1), in one sitting,
# when a rollout's time goes to waiting on a tool rather than to the model: bench/async-overlap/agent.ts is the demo's
# agent behind AGL_TOOL_MS (default 1500) of waiting. TRAINER=verl (default; VERL's trainer on CPU, whose update is
# most of a step) or local; STEPS (default 25) steps each; runs kept under BENCH_DIR. Prints each run's mean step
# time (steps 3 onward: the first ones include start-up effects) and the ratio. A bench: the demo's reward target does
# not apply to these short runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="${BENCH_DIR:-$(mktemp -d -t agl-async-overlap-XXXXXX)}"
TRAINER="${TRAINER:-verl}"
STEPS="${STEPS:-25}"
export AGL_TOOL_MS="${AGL_TOOL_MS:-1500}"
mkdir -p "$ROOT"
script=python-bridge/scripts/demo.sh
[ "$TRAINER" = verl ] && script=python-bridge/scripts/demo-verl.sh
echo "agl bench-async: $TRAINER trainer, $STEPS steps, tool wait $AGL_TOOL_MS ms per rollout; runs in $ROOT"
for k in 0 1; do
  ASYNC="$k" DEMO_STEPS="$STEPS" DEMO_AGENT=bench/async-overlap/agent.ts DEMO_DIR="$ROOT/async-$k" "$script" \
    >"$ROOT/async-$k.log" 2>&1
done
python-bridge/.venv/bin/python - "$ROOT" <<'PY'
import json, sys
from pathlib import Path

def mean_step(k: int) -> float:
    s = json.loads((Path(sys.argv[1]) / f"async-{k}" / "summary.json").read_text())
    steps = [t["step"] for t in s["timings"][2:] if "step" in t]
    return sum(steps) / len(steps)

sync, asynchronous = mean_step(0), mean_step(1)
print(f"synchronous {sync:.2f} s/step, asynchronous {asynchronous:.2f} s/step, ratio {asynchronous / sync:.2f}")
PY
