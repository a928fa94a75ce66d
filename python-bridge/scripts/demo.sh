#!/usr/bin/env bash
# make demo: train a tiny model by RL end to end on CPU with `agl train`: the store (SQLite), the agl LLM proxy, the
# TypeScript runner pool running examples/rl-kind/agent.ts, and the local trainer (policy server + GRPO with VERL's
# functions). Prints progress, a reward plot and the initial vs final reward, and writes the reward curve as a PNG
# beside summary.json. Run from the repository root after `make deps`. Environment: DEMO_SEED (default 0; seeds the
# model, the warm-up, the task order and the sampling), DEMO_STEPS (default 150), DEMO_DIR (default a new temporary
# directory), ASYNC (default 0: synchronous; k > 0 trains asynchronously with --max-staleness k), DEMO_AGENT (default
# the demo's agent; another agent module for the same task). Fails unless the demos' rule is met
# (agl_bridge/training/demo_rule.py: first step's reward <= 0.3, final one, the mean of the last 5 steps, >= 0.9).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/node-env.sh
DIR="${DEMO_DIR:-$(mktemp -d -t agl-demo-XXXXXX)}"
STEPS="${DEMO_STEPS:-150}"
SEED="${DEMO_SEED:-0}"
ASYNC="${ASYNC:-0}"
mkdir -p "$DIR"
echo "agl demo: seed $SEED, $STEPS steps of 8 tasks x 16 rollouts, max staleness $ASYNC; store, checkpoints and logs in $DIR"
started=$(date +%s)
node bin/agl.js train "${DEMO_AGENT:-examples/rl-kind/agent.ts}" --trainer local --database "$DIR/agl.db" --steps "$STEPS" \
  --tasks-per-step 8 --n 16 --checkpoint-dir "$DIR/ckpt" -- --seed "$SEED" --lr 7e-4 --kl-coef 0.01 --summary "$DIR/summary.json" \
  --target 0.9 --max-staleness "$ASYNC" "$@"
python-bridge/.venv/bin/python -m agl_bridge.training.demo_rule "$DIR/summary.json" --label "agl demo" --started "$started"
