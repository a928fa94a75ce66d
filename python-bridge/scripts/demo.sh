#!/usr/bin/env bash
# make demo: train a tiny model by RL end to end on CPU with `agl train`: the store (SQLite), the agl LLM proxy, the
# TypeScript runner pool running examples/rl-kind/agent.ts, and the local trainer (policy server + GRPO with VERL's
# functions). Prints progress, a reward plot and the initial vs final reward. Run from the repository root after
# `make deps`. Environment: DEMO_STEPS (default 200), DEMO_DIR (default a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/node-env.sh
DIR="${DEMO_DIR:-$(mktemp -d -t agl-demo-XXXXXX)}"
STEPS="${DEMO_STEPS:-200}"
mkdir -p "$DIR"
echo "agl demo: $STEPS steps of 8 tasks x 8 rollouts; store, checkpoints and logs in $DIR"
started=$(date +%s)
node bin/agl.js train examples/rl-kind/agent.ts --trainer local --database "$DIR/agl.db" --steps "$STEPS" \
  --checkpoint-dir "$DIR/ckpt" -- --summary "$DIR/summary.json" "$@"
python-bridge/.venv/bin/python - "$DIR/summary.json" "$started" <<'PY'
import json, sys, time
s = json.load(open(sys.argv[1]))
ok = s["initial_reward"] <= 0.3 and s["final_reward"] >= 0.8
print(f"\nagl demo: {len(s['rewards'])} steps, {time.time() - int(sys.argv[2]):.0f} s in all; "
      f"initial reward {s['initial_reward']:.3f} (target <= 0.3), final {s['final_reward']:.3f} "
      f"(target >= 0.8): {'reached' if ok else 'NOT reached'}")
sys.exit(0 if ok else 1)
PY
