"""Bridge benchmarks (figures only, never pass/fail). From the repository root:
``python-bridge/.venv/bin/python python-bridge/bench/bridge_bench.py``.

1. Triplets into DataProto: synthetic rollouts (1-4 triplets each, prompts 32-512 tokens, responses 16-256 tokens,
   logprobs, as StreamTriplets delivers them) through ``to_dataproto`` and the rollout-level advantage.
2. Bridge overhead per training step: the local trainer against a real store (memory backend) with in-process
   Python agents; time per phase — enqueue, wait (agents + policy-server generation), collect (StreamTriplets),
   convert (DataProto + advantages), update (GRPO), publish, checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from transformers.utils import logging as hf_logging  # noqa: E402

from agl_bridge.gen.agl.v1 import triplets_pb2, types_pb2  # noqa: E402
from agl_bridge.local.run import LocalTrainerOptions, run_local_trainer  # noqa: E402
from agl_bridge.training.advantage import compute_rollout_level_advantage  # noqa: E402
from agl_bridge.training.config import LoopConfig  # noqa: E402
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto  # noqa: E402

hf_logging.disable_progress_bar()
ROOT = Path(__file__).resolve().parents[2]


def synthetic(n_rollouts: int, group: int, seed: int = 0) -> list[triplets_pb2.RolloutTriplets]:
    rng = random.Random(seed)
    out = []
    for i in range(n_rollouts):
        msg = triplets_pb2.RolloutTriplets(
            rollout_id=f"ro-{i}",
            group_id=f"grp-{i // group}",
            status=types_pb2.ROLLOUT_STATUS_SUCCEEDED,
            final_reward=rng.random(),
        )
        for turn in range(rng.randint(1, 4)):
            p, r = rng.randint(32, 512), rng.randint(16, 256)
            msg.triplets.append(
                triplets_pb2.Triplet(
                    rollout_id=msg.rollout_id,
                    group_id=msg.group_id,
                    turn_index=turn,
                    prompt_token_ids=[rng.randrange(32000) for _ in range(p)],
                    response_token_ids=[rng.randrange(32000) for _ in range(r)],
                    response_mask=[1] * r,
                    logprobs=[-rng.random() for _ in range(r)],
                )
            )
        out.append(msg)
    return out


def bench_convert(n_rollouts: int) -> None:
    messages = synthetic(n_rollouts, group=8)
    n_triplets = sum(len(m.triplets) for m in messages)
    tokens = sum(len(t.prompt_token_ids) + len(t.response_token_ids) for m in messages for t in m.triplets)
    t1 = time.perf_counter()
    data, _ = to_dataproto(messages, ConvertOptions(pad_token_id=0, max_prompt_length=512, max_response_length=256))
    t2 = time.perf_counter()
    compute_rollout_level_advantage(data, "grpo")
    t3 = time.perf_counter()
    total = t3 - t1
    print(
        f"triplets -> DataProto: {n_rollouts} rollouts, {n_triplets} triplets, {tokens / 1e6:.1f} M tokens, "
        f"batch {tuple(data.batch['input_ids'].shape)}"
    )
    print(f"  to_dataproto {t2 - t1:.3f} s, rollout-level GRPO {t3 - t2:.3f} s")
    print(f"  => {n_triplets / total:,.0f} triplets/s, {tokens / total / 1e6:.2f} M tokens/s end to end")


def start_store() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        ["node", "bin/agl.js", "serve", "--memory", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return proc, match.group(1)
    raise RuntimeError("store did not start")


def bench_steps(steps: int) -> None:
    proc, address = start_store()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            options = LocalTrainerOptions(
                store=address,
                loop=LoopConfig(total_steps=steps, checkpoint_dir=f"{tmp}/ckpt"),
                warmup_steps=200,
                python_agents=2,
            )
            started = time.perf_counter()
            summary = asyncio.run(run_local_trainer(options))
            wall = time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait()
    timings = summary["timings"][1:] or summary["timings"]  # the first step warms caches
    phases = ["enqueue", "wait", "collect", "convert", "update", "publish", "checkpoint"]
    means = {p: statistics.mean(t.get(p, 0.0) for t in timings) for p in phases}
    step_s = sum(means.values())
    bridge = means["enqueue"] + means["collect"] + means["convert"] + means["publish"]
    print(
        f"\nper training step (local trainer, 8 tasks x 8 rollouts, memory store, mean of {len(timings)} steps, "
        "triplets from StreamTriplets):"
    )
    for p in phases:
        print(f"  {p:<10} {means[p] * 1000:8.1f} ms  {100 * means[p] / step_s:5.1f} %")
    print(
        f"  bridge (enqueue + collect + convert + publish) {bridge * 1000:.1f} ms = {100 * bridge / step_s:.1f} % "
        f"of a step; generation (wait) + update {100 * (means['wait'] + means['update']) / step_s:.1f} %"
    )
    print(f"  {steps} steps in {wall:.1f} s wall")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    bench_convert(args.rollouts)
    bench_steps(args.steps)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
