"""Where a step of VERL's trainer goes on CPU (``make bench-verl-cpu``).

Runs ``agl train --trainer verl`` on CPU (the demo task, the tiny model of ``make demo``; store, proxy, TypeScript
runners) for STEPS steps and prints the median and max seconds of each phase over the steps after the first (the
first pays one-time costs):

- generation: the step's rollouts, enqueue to all finished (runners -> proxy -> CPU replica);
- old log-prob: VERL's ``_compute_old_log_prob`` on the FSDP2 actor;
- ref log-prob: VERL's ``_compute_ref_log_prob`` on the reference model (with the KL loss: the demos' setting);
- actor update: VERL's ``_update_actor`` (PPO mini-batches);
- weight push: ``checkpoint_manager.update_weights`` (FSDP full tensors -> the replica's server);
- bridge: agl's own work — triplets from StreamTriplets, DataProto, advantages, proxy pause/drain, publication.

    PYTHONPATH=python-bridge python-bridge/.venv/bin/python python-bridge/bench/verl_cpu_bench.py [--steps 8] \
        [algorithm.rollout_correction.bypass_mode=true]   # make demo-verl's synchronous setting: no old log-prob pass
        [actor_rollout_ref.actor.use_kl_loss=true actor_rollout_ref.actor.kl_loss_coef=0.01]   # and its KL loss
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PHASES = {
    "generation": ("enqueue", "wait"),
    "old log-prob": ("old_log_prob",),
    "ref log-prob": ("ref_log_prob",),
    "actor update": ("update_actor",),
    "weight push": ("update_weights",),
    "replica sleep": ("sleep_replicas",),
    "bridge": ("collect", "convert", "publish", "proxy_pause_drain"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tasks", type=int, default=16, help="tasks per step")
    p.add_argument("--n", type=int, default=8, help="rollouts per task")
    p.add_argument("--workers", type=int, default=1, help="FSDP worker processes (and replicas)")
    p.add_argument("--dir", default=None)
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for the trainer (e.g. VERL's bypass mode)")
    a = p.parse_args()
    from agl_bridge.verl.kind_files import write_kind_files

    work = Path(a.dir or tempfile.mkdtemp(prefix="agl-verl-cpu-bench-"))
    files = write_kind_files(work / "files", warmup_steps=100)
    command = [
        "node", str(REPO / "bin" / "agl.js"), "train", "examples/rl-kind/agent.ts", "--trainer", "verl",
        "--database", str(work / "agl.db"), "--dataset", str(files.train), "--model", str(files.model),
        "--steps", str(a.steps), "--n", str(a.n), "--tasks-per-step", str(a.tasks),
        "--checkpoint-dir", str(work / "ckpt"), "--", "trainer.device=cpu", f"hydra.run.dir={work / 'hydra'}",
        f"data.train_files={files.prompts}", f"data.val_files={files.prompts}", "data.max_prompt_length=32",
        "data.max_response_length=8", "trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=8", f"trainer.n_gpus_per_node={a.workers}",
        f"agl.summary={work / 'summary.json'}", *a.overrides,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "python-bridge")}
    started = time.perf_counter()
    with (work / "train.log").open("w") as log:
        code = subprocess.run(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    if code != 0:
        sys.exit(f"agl train exited with {code}: see {work / 'train.log'}")
    summary = json.loads((work / "summary.json").read_text())
    steps = [{**t, **{k[len("timing_s/") :]: v for k, v in m.items() if k.startswith("timing_s/")}}
             for t, m in zip(summary["timings"], summary["metrics"], strict=True)][1:]  # fmt: skip
    load = os.getloadavg()[0]
    print(
        f"VERL trainer on CPU: {a.steps} steps of {a.tasks} tasks x {a.n} rollouts, {a.workers} worker(s), "
        f"{wall:.0f} s in all (Ray and model start included); load average {load:.1f} on {os.cpu_count()} cores"
        + (f"; {' '.join(a.overrides)}" if a.overrides else "")
    )
    print(f"{'phase':<14} {'median s':>9} {'max s':>7}   (steps 2..{a.steps})")
    totals = []
    for name, keys in PHASES.items():
        values = [sum(s.get(k, 0.0) for k in keys) for s in steps]
        print(f"{name:<14} {statistics.median(values):9.2f} {max(values):7.2f}")
    for s in steps:
        totals.append(sum(s.get(k, 0.0) for k in ("enqueue", "wait", "collect", "before_update", "update", "publish")))
    print(f"{'step':<14} {statistics.median(totals):9.2f} {max(totals):7.2f}")


if __name__ == "__main__":
    main()
