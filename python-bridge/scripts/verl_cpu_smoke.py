"""make verl-cpu-smoke: VERL's own trainer on CPU, end to end, checked from the outside.

``agl train --trainer verl`` (store on SQLite, LLM proxy, the TypeScript runner pool with examples/rl-kind/agent.ts)
trains the tiny demo model for STEPS steps on CPU — VERL's FSDP2 actor on gloo, its old log-probs and actor update,
the weights pushed to agl's CPU rollout replica — validating before training and after every step. Meanwhile this
script watches the replica the store publishes (``policy-0``): which weights it serves (``/agl/weights``) and the
log-probs of a fixed greedy completion. It then checks that

- every step trained (a progress line each, VERL's ``actor/*`` metrics in its Tracking log) and validation ran
  (``val/*`` metrics; val rollouts in the store);
- the replica first served the actor's initial weights (digest of the model directory), and new weights after each
  step: digests and the fixed prompt's log-probs changed;
- each step's rollouts were served by the version published after the previous step, and the store holds a new
  version per step.

Ends with ``verl-cpu-smoke: <n> steps, weights changed, served v<k>``; exits non-zero when any check fails.

    PYTHONPATH=python-bridge python-bridge/.venv/bin/python python-bridge/scripts/verl_cpu_smoke.py [--steps 2]
        [--workers 2] [--kl]

``--workers 2``: FSDP world size 2 on gloo and two replicas, both published (``make verl-cpu-smoke-variants``, as
``--kl``: VERL's KL loss, with the reference policy as a second forward-only FSDP2 model; ``actor/kl_loss`` must be
logged and non-zero).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESOURCES_ID = "verl-cpu-smoke"
_drains: set[asyncio.Task[bytes]] = set()
# --kl: VERL's KL loss against the reference policy (a second, forward-only FSDP2 model on CPU), logged as
# actor/kl_loss; after the first update the actor has moved, so the loss is no longer exactly 0.
KL_OVERRIDES = ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.1"]
KL_METRICS = ("actor/kl_loss",)
KL_NONZERO = re.compile(r"actor/kl_loss:(?:np\.float64\()?(?!0\.0\b)[-\d.e]+")
PROGRESS = re.compile(r"\[agl\] step (\d+)/(\d+) .* served by v([\d,?]+) -> published v(\d+)")


def fail(message: str) -> None:
    print(f"verl-cpu-smoke: FAILED: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


class ReplicaWatch:
    """What the published replica serves, per weights version: digest and the fixed prompt's greedy log-probs."""

    def __init__(self) -> None:
        self.seen: dict[int, dict[str, Any]] = {}

    def probe(self, base_url: str) -> None:
        root = base_url.removesuffix("/v1")
        try:
            before = http_json(f"{root}/agl/weights")
            answer = http_json(
                f"{base_url}/completions",
                {"prompt": "kind of fox ?", "max_tokens": 3, "temperature": 0, "logprobs": 1, "return_token_ids": True},
            )
            after = http_json(f"{root}/agl/weights")
        except (urllib.error.URLError, OSError, ValueError):
            return  # not up yet, or gone at the end
        version = int(answer["system_fingerprint"].rsplit("-v", 1)[1])
        if before["policy_version"] != version or after["policy_version"] != version:
            return  # weights changed under the probe: take the next one
        choice = answer["choices"][0]
        self.seen.setdefault(
            version,
            {
                "digest": after["digest"],
                "token_ids": choice["token_ids"],
                "logprobs": choice["logprobs"]["token_logprobs"],
            },
        )


async def watch(store: str, replica: ReplicaWatch, stop: asyncio.Event) -> None:
    from agl_bridge import StoreClient

    async with StoreClient(store) as client:
        while not stop.is_set():
            try:
                update = await client.get_resources(RESOURCES_ID)
                endpoint = update.resources["policy-0"].llm.endpoint
            except Exception:  # noqa: BLE001 - not published yet
                endpoint = None
            if endpoint:
                await asyncio.to_thread(replica.probe, endpoint)
            await asyncio.sleep(0.2)


async def store_facts(store: str) -> tuple[int, int, int]:
    """The published version, the validation rollouts, and how many replicas (``policy-N``) were published."""
    from agl_bridge import StoreClient
    from agl_bridge.gen.agl.v1 import types_pb2

    async with StoreClient(store) as client:
        update = await client.get_resources(RESOURCES_ID)
        rollouts = (await client.query_rollouts(limit=10_000)).rollouts
        replicas = sum(name.startswith("policy-") for name in update.resources)
        return update.version, sum(r.mode == types_pb2.ROLLOUT_MODE_VAL for r in rollouts), replicas


async def run(args: argparse.Namespace) -> None:
    from agl_bridge.verl.cpu_rollout import weights_digest
    from agl_bridge.verl.kind_files import write_kind_files

    work = Path(args.dir or tempfile.mkdtemp(prefix="agl-verl-cpu-smoke-"))
    started = time.time()
    # A short format warm-up: some answers right, some wrong, so GRPO has advantages to learn from.
    files = write_kind_files(work / "files", warmup_steps=args.warmup_steps, val_tasks=args.val_tasks)
    import torch
    from transformers import AutoModelForCausalLM

    # VERL 0.9's weight sync sends the FSDP parameters at the actor's dtype (FSDPEngine.get_per_tensor_param; 0.8
    # cast them to bfloat16): the replica's first weights are exactly the actor's initial ones.
    initial = AutoModelForCausalLM.from_pretrained(str(files.model), local_files_only=True, dtype=torch.float32)
    initial_digest = weights_digest(initial)
    # The store outlives the trainer (agl train stops the one it starts): it is checked afterwards.
    store_process = await asyncio.create_subprocess_exec(
        "node", str(REPO / "bin" / "agl.js"), "serve", "--database", str(work / "agl.db"), "--port", "0",
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        store = await store_address(store_process)
        await train_and_check(args, work, files, initial_digest, store, started)
    finally:
        store_process.terminate()
        await store_process.wait()


async def store_address(process: asyncio.subprocess.Process) -> str:
    """The URL the store prints once listening; its later output is read and dropped (a full pipe would stall it)."""
    assert process.stdout is not None
    async for raw in process.stdout:
        if found := re.search(r"agl store listening on (http://\S+)", raw.decode(errors="replace")):
            rest = process.stdout
            _drains.add(asyncio.create_task(rest.read()))
            return found.group(1)
    fail("the store exited before listening")
    raise AssertionError


async def train_and_check(
    args: argparse.Namespace, work: Path, files: Any, initial_digest: str, store: str, started: float
) -> None:
    command = [
        "node", str(REPO / "bin" / "agl.js"), "train", "examples/rl-kind/agent.ts", "--trainer", "verl",
        "--store", store, "--dataset", str(files.train), "--val-dataset", str(files.val),
        "--model", str(files.model), "--steps", str(args.steps), "--n", "4", "--tasks-per-step", "4",
        "--checkpoint-dir", str(work / "ckpt"), "--",
        "trainer.device=cpu", f"hydra.run.dir={work / 'hydra'}", f"agl.resources_id={RESOURCES_ID}",
        f"data.train_files={files.prompts}",
        f"data.val_files={files.prompts}", "data.max_prompt_length=64", "data.max_response_length=4",
        "trainer.test_freq=1", "trainer.val_before_train=true", "trainer.save_freq=-1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.optim.lr=1e-3",
        f"trainer.n_gpus_per_node={args.workers}", *(KL_OVERRIDES if args.kl else []), *args.overrides,
    ]  # fmt: skip
    log_path = work / "train.log"
    kl = ", KL on (reference model)" if args.kl else ""
    print(f"verl-cpu-smoke: {args.steps} steps, {args.workers} worker(s){kl}; log {log_path}", flush=True)
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'python-bridge'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = await asyncio.create_subprocess_exec(
        *command, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    replica, stop = ReplicaWatch(), asyncio.Event()
    watcher = asyncio.create_task(watch(store, replica, stop))
    lines: list[str] = []
    assert process.stdout is not None
    with log_path.open("w") as log:
        async for raw in process.stdout:
            line = raw.decode(errors="replace")
            log.write(line)
            lines.append(line)
            if "[agl]" in line:
                print(line.rstrip()[line.find("[agl]") :], flush=True)
    code = await process.wait()
    stop.set()
    await watcher
    text = "".join(lines)
    wall = time.time() - started
    if code != 0:
        fail(f"agl train exited with {code} (log: {log_path})")
    steps = [m for line in lines if (m := PROGRESS.search(line))]
    if len(steps) != args.steps:
        fail(f"{len(steps)} progress lines for {args.steps} steps")
    for name in ("actor/pg_loss", "actor/grad_norm", "actor/ppo_kl", "val/reward_mean", *KL_METRICS * args.kl):
        if name + ":" not in text:
            fail(f"no {name} in VERL's Tracking log")
    if args.kl and not KL_NONZERO.search(text):
        fail("actor/kl_loss stayed 0: the reference model's log-probs did not reach the loss")
    version, n_val, replicas = await store_facts(store)
    if replicas != args.workers:
        fail(f"{replicas} replicas published, expected one per worker ({args.workers})")
    if version != args.steps + 1:
        fail(f"the store holds {RESOURCES_ID} v{version}, expected v{args.steps + 1} (one per step after the first)")
    if n_val != args.val_tasks * (args.steps + 1):
        fail(f"{n_val} validation rollouts, expected {args.val_tasks} before training and after each step")
    for m in steps:
        step, served, published = int(m.group(1)), m.group(3), int(m.group(4))
        if served != str(step) or published != step + 1:
            fail(f"step {step} was served by v{served} and published v{published}, expected v{step} -> v{step + 1}")
    versions = sorted(replica.seen)
    if versions != list(range(1, args.steps + 2)):
        fail(f"the replica was seen serving weight versions {versions}, expected 1..{args.steps + 1}")
    first, last = replica.seen[versions[0]], replica.seen[versions[-1]]
    if first["digest"] != initial_digest:
        fail("the replica's first weights are not the actor's initial weights")
    digests = [replica.seen[v]["digest"] for v in versions]
    if len(set(digests)) != len(digests):
        fail(f"the weights did not change at every step: digests {digests}")
    if first["logprobs"] == last["logprobs"]:
        fail("the fixed prompt's log-probs did not change")
    delta = max(abs(a - b) for a, b in zip(first["logprobs"], last["logprobs"], strict=False))
    print(
        f"verl-cpu-smoke: weights v1 {digests[0]} -> v{versions[-1]} {digests[-1]}; fixed prompt log-probs "
        f"{[round(x, 4) for x in first['logprobs']]} -> {[round(x, 4) for x in last['logprobs']]} (max change "
        f"{delta:.4f}); {n_val} validation rollouts; {wall:.0f} s in all",
        flush=True,
    )
    print(f"verl-cpu-smoke: {len(steps)} steps, weights changed, served v{version}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--workers", type=int, default=1, help="FSDP worker processes (and replicas)")
    p.add_argument("--kl", action="store_true", help="KL loss on: the reference model as a second FSDP2 model")
    p.add_argument("--val-tasks", type=int, default=8)
    p.add_argument("--warmup-steps", type=int, default=60, help="format warm-up of the tiny model")
    p.add_argument("--dir", default=None, help="working directory (default: a new temporary one)")
    p.add_argument("overrides", nargs="*", help="more Hydra overrides for the trainer")
    args = p.parse_args()
    if args.steps < 2:
        fail("--steps must be at least 2")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
