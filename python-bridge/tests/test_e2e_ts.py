"""End to end with the TypeScript side: store + `agl proxy` + `agl run examples/rl-kind/agent.ts` (runner pool) + the
local trainer loop. New versions are published and picked up by the runners (through the proxy), the token ids in
the training DataProto are exactly those the policy server sampled, and validation runs the same agent (greedy, as
val rollouts through the proxy) without its calls reaching a training batch."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("verl")

from conftest import REPO_ROOT  # noqa: E402
from test_local import RecordingBackend, tiny_policy  # noqa: E402

from agl_bridge.local import tasks  # noqa: E402
from agl_bridge.local.server import PolicyServer  # noqa: E402
from agl_bridge.store.client import StoreClient  # noqa: E402
from agl_bridge.training.loop import LoopConfig, TrainingLoop  # noqa: E402

AGENT = REPO_ROOT / "examples" / "rl-kind" / "agent.ts"


def _start(args: list[str], log: Path, ready: str | None) -> tuple[subprocess.Popen[bytes], str]:
    node = shutil.which("node")
    assert node, "node is not on PATH"
    handle = log.open("wb")
    proc = subprocess.Popen(
        [node, str(REPO_ROOT / "bin" / "agl.js"), *args],
        cwd=REPO_ROOT,
        stdout=handle,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    if ready is None:
        return proc, ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(ready + r" (http://\S+)", log.read_text(errors="replace"))
        if match:
            return proc, match.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"{args[0]} did not start:\n{log.read_text(errors='replace')}")


def _start_proxy_and_runner(
    store_address: str, tmp_path: Path
) -> tuple[subprocess.Popen[bytes], str, subprocess.Popen[bytes]]:
    """An agl LLM proxy and a runner pool of the demo agent, both against the store; logs under ``tmp_path``."""
    proxy, proxy_url = _start(
        ["proxy", "--store", store_address, "--port", "0"], tmp_path / "proxy.log", "agl proxy listening on"
    )
    runner, _ = _start(
        ["run", str(AGENT), "--store", store_address, "--workers", "1", "--concurrency", "16"],
        tmp_path / "runner.log",
        None,
    )
    return proxy, proxy_url, runner


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not AGENT.exists(), reason="examples/rl-kind/agent.ts is missing")
async def test_ts_runner_proxy_and_local_trainer(store_address, tmp_path):
    proxy, proxy_url, runner = _start_proxy_and_runner(store_address, tmp_path)
    policy = tiny_policy()
    server = PolicyServer(policy, "tiny")
    await server.start()
    try:
        backend = RecordingBackend(
            policy, server, proxy_url=f"{proxy_url}/v1", sampling={"temperature": 1.0, "max_tokens": 4}
        )
        config = LoopConfig(
            total_steps=3,
            tasks_per_step=2,
            n=4,
            resources_id="e2e",
            rollout_timeout=90,
            max_response_length=4,
            test_freq=3,
            val_n=2,
            val_sampling={"temperature": 0.0},
        )
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(
                client,
                backend,
                tasks.make_tasks(64),
                config,
                val_dataset=tasks.make_tasks(4, seed=5),
            )
            history = await loop.run()
            snapshot = await client.get_resources("e2e")
            stamps = [
                (m.rollout.mode, t.resources_id, t.resources_version)
                async for m in client.stream_triplets()
                if m.HasField("rollout")
                for t in m.rollout.triplets
            ]
    finally:
        await server.stop()
        policy.close()
        _stop(runner)
        _stop(proxy)
    logs = (tmp_path / "runner.log").read_text(errors="replace")
    assert [r.step for r in history] == [0, 1, 2], logs
    assert all(r.n_rollouts == 8 and r.n_rows == 8 for r in history), logs
    # Each step is served (as recorded by the proxy) by the version published just before it, and publishes the next.
    assert [r.version for r in history] == [2, 3, 4] and snapshot.version == 4
    assert [max(r.versions_seen) for r in history] == [1, 2, 3]
    assert snapshot.resources["main_llm"].WhichOneof("kind") == "proxy_llm"
    # Token fidelity: every row trained on is exactly a (prompt, response) the policy server sampled; the 16
    # validation calls, recorded by the proxy with their token ids too, are not among them.
    sampled = {(tuple(p), tuple(r)) for p, r in server.sampled}
    rows = [(tuple(p), tuple(r)) for batch in backend.batches for p, r in batch]
    assert len(rows) == 24 and set(rows) <= sampled
    # Validation before training and after the last step (test_freq 3), on policy v1 and v4: 4 tasks x 2, greedy
    # (the agent passes the val snapshot's temperature 0 on), so both rollouts of a task score alike.
    assert [(v.step, v.version, v.n) for v in loop.val_history] == [(0, 1, 8), (3, 4, 8)]
    for v in loop.val_history:
        assert v.metrics["val/n_rollouts_w_reward"] == 8 and v.metrics["val/n_rollouts_w_trace"] == 8, logs
        assert v.metrics["val/reward_best@2"] == v.metrics["val/reward_mean"]
    # The proxy stamps every call with the resources its rollout ran under: validation calls with the validation
    # snapshot (published before training and after the last step), training calls with the training snapshot.
    assert {(res, ver) for mode, res, ver in stamps if mode == 2} == {("e2e-val", 1), ("e2e-val", 2)}
    assert {(res, ver) for mode, res, ver in stamps if mode == 1} == {("e2e", 1), ("e2e", 2), ("e2e", 3)}
    assert len(stamps) == 24 + 16


@pytest.mark.skipif(not AGENT.exists(), reason="examples/rl-kind/agent.ts is missing")
async def test_ts_runner_proxy_and_asynchronous_local_trainer(store_address, tmp_path):
    """max_staleness 1: the runners work on the next step's groups while a copy of the model trains; every trained
    call, as the proxy stamped it, was served by weights at most one update old, and VERL's truncated importance
    weights correct for it."""
    from agl_bridge.training.rollout_correction import resolve_rollout_correction

    proxy, proxy_url, runner = _start_proxy_and_runner(store_address, tmp_path)
    policy = tiny_policy()
    policy.grpo.rollout_correction = resolve_rollout_correction(None, max_staleness=1)
    policy.train_on_copy()
    server = PolicyServer(policy, "tiny")
    await server.start()
    versions: list[list[int]] = []

    class Recording(RecordingBackend):
        async def update(self, data):
            versions.append([int(v) for v in data.non_tensor_batch["resources_version_list"]])
            return await super().update(data)

    try:
        backend = Recording(policy, server, proxy_url=f"{proxy_url}/v1", sampling={"temperature": 1.0, "max_tokens": 4})
        config = LoopConfig(
            total_steps=4,
            tasks_per_step=2,
            n=4,
            resources_id="e2e-async",
            rollout_timeout=90,
            max_response_length=4,
            max_staleness=1,
            checkpoint_dir=str(tmp_path / "ck"),
        )
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(client, backend, tasks.make_tasks(64), config)
            history = await loop.run()
    finally:
        await server.stop()
        policy.close()
        _stop(runner)
        _stop(proxy)
    logs = (tmp_path / "runner.log").read_text(errors="replace")
    assert [r.step for r in history] == [0, 1, 2, 3], logs
    assert all(r.n_rollouts == 8 and r.n_rows == 8 for r in history), logs
    # v1 serves the weights after 0 updates, v(k+1) after k: step k trains calls of v(k+1) or v(k), never older.
    assert all(v in (step, step + 1) for step, rows in enumerate(versions) for v in rows), versions
    assert any(v == step for step, rows in enumerate(versions) for v in rows), "generation never ran ahead"
    stale = sum(r.metrics.get("async/staleness/1", 0) for r in history)
    assert stale == sum(v == step for step, rows in enumerate(versions) for v in rows)
    assert all(r.metrics["async/groups_dropped_stale"] == 0 for r in history)
    assert all("rollout_corr/rollout_is_mean" in r.metrics for r in history)
    # Token fidelity holds: every row trained on is exactly a (prompt, response) the policy server sampled.
    sampled = {(tuple(p), tuple(r)) for p, r in server.sampled}
    rows = [(tuple(p), tuple(r)) for batch in backend.batches for p, r in batch]
    assert len(rows) == 32 and set(rows) <= sampled
