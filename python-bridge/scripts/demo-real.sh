#!/usr/bin/env bash
# make demo-real: Gemma 3 270M (base; `make model-gemma`) trained by RL through agl on CPU, on examples/word-math
# (two LLM calls a rollout: the calculation, then the answer). VERL's own trainer by default (TRAINER=local: the local
# trainer). The held-out test split (never trained on) is scored greedily before training and after the last step;
# the run ends with one line, `demo-real: held-out accuracy A -> B (+D, 95% CI [LO, HI]), N steps, S s: reached|missed`,
# and exits non-zero when missed (target: a gain of at least +0.15 with the CI above 0); the same split sampled at
# training's temperature (one rollout a problem) is reported beside it. The agent's prompt is a template resource the
# trainer publishes (prompts/DEMO_PROMPT.txt). Environment: TRAINER (verl|local), DEMO_SEED (0; the sampling seed of
# either trainer, VERL's rollout.seed, and the local trainer's torch seed), DEMO_STEPS (12),
# DEMO_TASKS (tasks per step, 8), DEMO_N (rollouts per task, 4), DEMO_LR (1e-6), DEMO_TEMP (training's sampling
# temperature, 0.7), DEMO_PROMPT (instructed), DEMO_DIR (a new temporary directory), DEMO_MICRO_BATCH (the local
# trainer's rows a forward pass, 64).
# Choosing settings: DEMO_HELDOUT=val scores the validation split instead of test, every DEMO_TEST_FREQ steps (local).
# DEMO_SCORE=1 only scores the prompt, greedily on the validation split, through the same agent (local trainer, no
# training): how the starting prompt was chosen (docs/rl-training.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/node-env.sh
TRAINER="${TRAINER:-verl}"
DIR="${DEMO_DIR:-$(mktemp -d -t agl-demo-real-XXXXXX)}"
STEPS="${DEMO_STEPS:-12}"
N="${DEMO_N:-4}"
TASKS="${DEMO_TASKS:-8}"
SEED="${DEMO_SEED:-0}"
LR="${DEMO_LR:-1e-6}"
TEMP="${DEMO_TEMP:-0.7}"
PROMPT="$PWD/examples/word-math/prompts/${DEMO_PROMPT:-instructed}.txt"
PY=python-bridge/.venv/bin/python
MODEL="$PWD/.cache/models/gemma3-270m/gemma-3-270m-q4_k_m.gguf.hf"
export PYTHONPATH="$PWD/python-bridge${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$DIR"
rm -rf "$DIR/ckpt" "$DIR"/agl.db*
npx tsx examples/word-math/tasks.ts "$DIR/tasks"
T="$DIR/tasks"
VAL="$T/${DEMO_HELDOUT:-test}.jsonl" EXTRA=()
# DEMO_HELDOUT_LIMIT=K keeps the held-out split's first K problems (a quick check of the path, not a result).
if [ -n "${DEMO_HELDOUT_LIMIT:-}" ]; then head -n "$DEMO_HELDOUT_LIMIT" "$VAL" > "$T/heldout.jsonl"; VAL="$T/heldout.jsonl"; fi
if [ -n "${DEMO_SCORE:-}" ]; then TRAINER=local VAL="$T/val.jsonl" EXTRA=(--val-only --val-sampled-n 0); fi
echo "agl demo-real: Gemma 3 270M, $TRAINER trainer, seed $SEED, $STEPS steps of $TASKS tasks x $N rollouts, lr $LR," \
  "temperature $TEMP, prompt $(basename "$PROMPT" .txt);" \
  "held-out $(basename "$VAL" .jsonl) split $(wc -l < "$VAL") tasks; files and logs in $DIR"
started=$(date +%s)
# Stable settings for a real model (docs/rl-training.md): a small constant lr, gradient clipping 1.0, embeddings
# frozen (most of the parameters, and what a high lr damages first), log-probs on response tokens only.
if [ "$TRAINER" = local ]; then
  node bin/agl.js train examples/word-math/agent.ts --trainer local --database "$DIR/agl.db" --steps "$STEPS" \
    --tasks-per-step "$TASKS" --n "$N" --concurrency 64 --dataset "$T/train.jsonl" --val-dataset "$VAL" \
    --model "$MODEL" -- \
    --seed "$SEED" --lr "$LR" --grad-clip 1.0 --freeze-embeddings --micro-batch "${DEMO_MICRO_BATCH:-64}" --max-tokens 24 \
    --prompt-templates "{\"word_math\": \"$PROMPT\"}" --temperature "$TEMP" --val-temperature 0 --val-sampled-n 1 \
    --test-freq "${DEMO_TEST_FREQ:-$STEPS}" --threads 2 --rollout-timeout 3600 \
    --attempt-timeout 1800 --max-batch 64 \
    --summary "$DIR/summary.json" "${EXTRA[@]}" > >(tee "$DIR/train.log") 2>&1
  if [ -n "${DEMO_SCORE:-}" ]; then
    "$PY" - "$DIR/summary.json" "$(basename "$PROMPT" .txt)" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["validation"][0]
print(f"demo-real: prompt {sys.argv[2]} scores {v['reward_mean']:.3f} greedy on {v['n']} validation problems")
PY
    exit 0
  fi
else
  "$PY" - "$T" <<'PY'
import json, sys, pandas as pd
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/train.jsonl")]
# VERL's TaskRunner loads a prompt Parquet; agl's loop reads the tasks from agl.train_dataset instead.
pd.DataFrame({"prompt": [[{"role": "user", "content": r["question"]}] for r in rows[:64]], "data_source": "agl-word-math",
              "reward_model": [{"ground_truth": str(r["answer"])} for r in rows[:64]]}).to_parquet(f"{sys.argv[1]}/prompts.parquet")
PY
  # One mini-batch a step (ppo_mini_batch_size = the step's tasks: all rows of their rollouts, two a rollout), one
  # optimizer step as the local trainer's. Micro-batches by tokens: the shared prefix runs once per micro-batch, so
  # four for the update (~64 rows of ~560 tokens; two, at 20480, took the actor to 13 GB and Ray's memory monitor
  # killed it in step 6 on a 23 GiB machine) and one for the old log-probs where VERL computes them.
  node bin/agl.js train examples/word-math/agent.ts --trainer verl --database "$DIR/agl.db" --steps "$STEPS" \
    --dataset "$T/train.jsonl" --val-dataset "$VAL" --model "$MODEL" --n "$N" --tasks-per-step "$TASKS" \
    --concurrency 64 -- \
    trainer.device=cpu hydra.run.dir="$DIR/hydra" trainer.default_local_dir="$DIR/ckpt" data.train_files="$T/prompts.parquet" \
    data.val_files="$T/prompts.parquet" data.max_prompt_length=768 data.max_response_length=24 \
    trainer.val_before_train=true trainer.test_freq="${DEMO_TEST_FREQ:-$STEPS}" trainer.save_freq=-1 algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.use_kl_loss=false actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.optim.lr="$LR" actor_rollout_ref.actor.optim.lr_scheduler_type=constant \
    actor_rollout_ref.actor.optim.weight_decay=0 actor_rollout_ref.actor.grad_clip=1.0 \
    actor_rollout_ref.actor.ppo_mini_batch_size="$TASKS" actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240 \
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40960 \
    +actor_rollout_ref.model.override_config.agl_freeze_embeddings=true \
    actor_rollout_ref.rollout.temperature="$TEMP" \
    actor_rollout_ref.rollout.response_length=24 actor_rollout_ref.rollout.val_kwargs.temperature=0 \
    "agl.prompt_templates={word_math:'$PROMPT'}" agl.val_sampled_n=1 \
    actor_rollout_ref.rollout.seed="$SEED" actor_rollout_ref.actor.data_loader_seed="$SEED" 'ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS="2"' \
    agl.summary="$DIR/summary.json" "$@" \
    > >(tee "$DIR/train.log" | sed -un 's/^.*\(\[agl\]\)/\1/p') 2>&1
fi
"$PY" -m agl_bridge.training.heldout_rule "$DIR/summary.json" --started "$started"
