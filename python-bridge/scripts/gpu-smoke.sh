#!/usr/bin/env bash
# GPU smoke test of the VERL trainer (1–2 steps, a small model) on one GPU node with CUDA and vLLM: verl 0.9.1's V1
# trainer, its FSDP actor and vLLM rollout replicas (colocated, asleep during the update), weights pushed by its
# checkpoint engine, agl's loop through the store.
#
#   MODEL=/models/Qwen2.5-0.5B-Instruct python-bridge/scripts/gpu-smoke.sh
#   MODEL=... ASYNC=1 python-bridge/scripts/gpu-smoke.sh     # agl.max_staleness=1 (VERL: colocate_async)
#
# Needs: the repository with `make deps` done; `pip install 'verl[vllm]==0.9.1'` in python-bridge/.venv (VERL's vLLM
# set: vllm 0.24.0 with its CUDA torch 2.11.0 and transformers 5.9.0, in place of the CPU pins; TransferQueue comes
# with it); a local model directory in MODEL (nothing is downloaded). Starts a memory store, the agl proxy and the
# TypeScript runner with the demo agent (examples/rl-kind/agent.ts asks "kind of fox ?" — any instruct model can
# answer it, the point is the plumbing), then runs `python -m agl_bridge.verl` for STEPS steps, validating before
# training and after every step (8 validation tasks, greedy, as rollouts of mode val), and checks that the store saw
# a new resource version per step, the validation rollouts, and VERL's actor/ and val/ metrics in the log.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/node-env.sh
: "${MODEL:?set MODEL to a local Hugging Face model directory}"
STEPS="${STEPS:-2}"
ASYNC="${ASYNC:-0}"
PY=python-bridge/.venv/bin/python
DIR="$(mktemp -d -t agl-gpu-smoke-XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done' EXIT
wait_url() { for _ in $(seq 1 150); do grep -qE "$2" "$1" && { grep -oE 'https?://[^ )]+' "$1" | head -1; return 0; }; sleep 0.2; done; cat "$1" >&2; exit 1; }

node bin/agl.js serve --memory --port 0 >"$DIR/store.log" 2>&1 & pids+=($!)
STORE=$(wait_url "$DIR/store.log" "agl store listening on")
node bin/agl.js proxy --store "$STORE" --port 0 >"$DIR/proxy.log" 2>&1 & pids+=($!)
PROXY=$(wait_url "$DIR/proxy.log" "agl proxy listening on")
node bin/agl.js run examples/rl-kind/agent.ts --store "$STORE" --workers 1 --concurrency 64 >"$DIR/runner.log" 2>&1 &
pids+=($!)

# Task inputs for the agent (training and validation), and a prompt parquet VERL's dataloader insists on (the agl
# loop does not read it).
"$PY" - "$DIR" <<'PY'
import json, sys
import pandas as pd
from agl_bridge.local.tasks import format_prompt, make_tasks
d = sys.argv[1]
tasks = make_tasks(64, seed=3)
with open(f"{d}/tasks.jsonl", "w") as f:
    f.writelines(json.dumps(t) + "\n" for t in tasks)
with open(f"{d}/val.jsonl", "w") as f:
    f.writelines(json.dumps(t) + "\n" for t in make_tasks(8, seed=11))
pd.DataFrame({"prompt": [[{"role": "user", "content": format_prompt(t)}] for t in tasks],
              "data_source": "agl", "reward_model": [{"ground_truth": t["answer"]} for t in tasks]}
             ).to_parquet(f"{d}/prompts.parquet")
PY

"$PY" -m agl_bridge.verl \
  agl.store="$STORE" agl.proxy="$PROXY/v1" agl.train_dataset="$DIR/tasks.jsonl" agl.resources_id=gpu-smoke \
  agl.val_dataset="$DIR/val.jsonl" agl.val_timeout=600 \
  data.train_files="$DIR/prompts.parquet" data.val_files="$DIR/prompts.parquet" \
  data.train_batch_size=4 data.max_prompt_length=256 data.max_response_length=32 \
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.actor.optim.lr=1e-6 \
  algorithm.adv_estimator=grpo trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger=[console] \
  trainer.total_training_steps="$STEPS" trainer.val_before_train=true trainer.save_freq=-1 trainer.test_freq=1 \
  trainer.default_local_dir="$DIR/ckpt" trainer.device=cuda agl.max_staleness="$ASYNC" 2>&1 | tee "$DIR/trainer.log"

for metric in val/reward_mean actor/pg_loss; do
  grep -q "$metric" "$DIR/trainer.log" || { echo "gpu-smoke: no $metric in the trainer's log" >&2; exit 1; }
done
"$PY" - "$STORE" "$STEPS" <<'PY'
import asyncio, sys
from agl_bridge import StoreClient
async def main(address, steps):
    async with StoreClient(address) as store:
        latest = await store.get_resources("gpu-smoke")
        stats = await store.statistics()
        print(f"gpu-smoke: resources version {latest.version} (expect {steps + 1}), {stats}")
        assert latest.version >= steps + 1, "the trainer did not publish a version per step"
        # Validation before training and after each step: 8 greedy val rollouts each, on their own snapshot.
        val = await store.get_resources("gpu-smoke-val")
        rollouts = (await store.query_rollouts(limit=10_000)).rollouts
        n_val = sum(r.mode == 2 for r in rollouts)  # ROLLOUT_MODE_VAL
        print(f"gpu-smoke: {val.version} validations, {n_val} val rollouts (expect {steps + 1} and {8 * (steps + 1)})")
        assert val.version == steps + 1 and n_val == 8 * (steps + 1), "validation did not run before and after each step"
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
PY
echo "gpu-smoke: OK (logs in $DIR)"
