#!/usr/bin/env bash
# make demo-verl: the task of `make demo` (examples/rl-kind/agent.ts, "kind of fox ?") trained by VERL's own trainer
# on CPU with `agl train --trainer verl`: the store (SQLite), the agl LLM proxy, the TypeScript runner pool, and
# VERL 0.9's V1 trainer machinery (FSDP2 actor on gloo in fp32, VERL's log-probs and PPO update, weights pushed to
# agl's CPU rollout replica). Same model and warm-up as `make demo`; the same progress lines, reward plot and pass/fail
# rule (agl_bridge/training/demo_rule.py: first step <= 0.3, final, the mean of the last 5 steps, >= 0.9). Run from
# the repository root after `make deps`. Environment: DEMO_STEPS (default 150), DEMO_SEED (default 0; seeds the model,
# the warm-up, the task order and the replica's sampling, as in `make demo`), DEMO_DIR (default a new temporary
# directory), ASYNC (default 0; k > 0: agl.max_staleness=k), DEMO_AGENT (default the demo's agent; another agent
# module for the same task); extra arguments are Hydra overrides for the trainer.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/node-env.sh
DIR="${DEMO_DIR:-$(mktemp -d -t agl-demo-verl-XXXXXX)}"
STEPS="${DEMO_STEPS:-150}"
SEED="${DEMO_SEED:-0}"
ASYNC="${ASYNC:-0}"
PY=python-bridge/.venv/bin/python
export PYTHONPATH="$PWD/python-bridge${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$DIR"
echo "agl demo-verl: $STEPS steps of 8 tasks x 16 rollouts through VERL's trainer on CPU, max staleness $ASYNC;" \
  "files and logs in $DIR"
started=$(date +%s)
# The model of `make demo` (tiny Llama, format warm-up) and the task files; kept when DEMO_DIR already has them.
[ -f "$DIR/files/model/config.json" ] || "$PY" -m agl_bridge.verl.kind_files "$DIR/files" --seed "$SEED" >/dev/null
rm -rf "$DIR/ckpt" "$DIR"/agl.db*
F="$DIR/files"
# Synchronously every row was sampled by the weights being updated, and the replica computes in fp32 as the actor
# does (their log-probs agree to ~1e-6): VERL's bypass mode takes the engine's log-probs as the old ones instead of
# recomputing them. Asynchronously the rows span versions: the old log-probs are recomputed (VERL's decoupled mode).
BYPASS=true
[ "$ASYNC" = 0 ] || BYPASS=false
# VERL's settings for the task (a tiny model, 24 words to learn): GRPO, a KL loss of 0.01 against the warmed-up model
# (the reference), no entropy bonus, no weight decay, one PPO update per step over all of its rows, a constant lr 7e-4
# — the local trainer's (docs/demo-learning.md): at 1e-3 shared parameters drift faster than each word's evidence,
# and without the KL loss a word whose 16 answers all fail gets no gradient and stays lost (docs/rl-training.md).
node bin/agl.js train "${DEMO_AGENT:-examples/rl-kind/agent.ts}" --trainer verl --database "$DIR/agl.db" --steps "$STEPS" \
  --dataset "$F/tasks.jsonl" --model "$F/model" --n 16 --tasks-per-step 8 --checkpoint-dir "$DIR/ckpt" -- \
  trainer.device=cpu hydra.run.dir="$DIR/hydra" \
  data.train_files="$F/prompts.parquet" data.val_files="$F/prompts.parquet" \
  data.max_prompt_length=32 data.max_response_length=8 trainer.val_before_train=false trainer.test_freq=-1 \
  trainer.save_freq=-1 algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=true \
  actor_rollout_ref.actor.kl_loss_coef=0.01 actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.entropy_coeff=0 actor_rollout_ref.actor.optim.lr=7e-4 \
  actor_rollout_ref.actor.optim.lr_scheduler_type=constant \
  actor_rollout_ref.actor.optim.weight_decay=0 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.actor.ppo_epochs=1 actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.actor.data_loader_seed="$SEED" actor_rollout_ref.rollout.seed="$SEED" agl.summary="$DIR/summary.json" agl.max_staleness="$ASYNC" \
  algorithm.rollout_correction.bypass_mode="$BYPASS" "$@" \
  > >(tee "$DIR/train.log" | sed -un 's/^.*\(\[agl\]\)/\1/p') 2>&1
"$PY" -m agl_bridge.training.demo_rule "$DIR/summary.json" --label "agl demo-verl" --started "$started" --plot
