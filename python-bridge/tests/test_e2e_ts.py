"""End to end with the TypeScript side: store + `agl proxy` + `agl run examples/rl-kind/agent.ts` (runner pool) + the
local trainer loop. New versions are published and picked up by the runners (through the proxy), and the token ids
in the training DataProto are exactly those the policy server sampled."""

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

from agl_bridge.client import StoreClient  # noqa: E402
from agl_bridge.local import tasks  # noqa: E402
from agl_bridge.local.server import PolicyServer  # noqa: E402
from agl_bridge.loop import LoopConfig, TrainingLoop  # noqa: E402

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
    proxy, proxy_url = _start(
        ["proxy", "--store", store_address, "--port", "0"], tmp_path / "proxy.log", "agl proxy listening on"
    )
    runner, _ = _start(
        ["run", str(AGENT), "--store", store_address, "--workers", "1", "--concurrency", "16"],
        tmp_path / "runner.log",
        None,
    )
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
            triplet_source="stream",
        )
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(client, backend, tasks.make_tasks(64), config, log=lambda _: None)
            history = await loop.run()
            snapshot = await client.get_resources("e2e")
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
    # Token fidelity: every row trained on is exactly a (prompt, response) the policy server sampled.
    sampled = {(tuple(p), tuple(r)) for p, r in server.sampled}
    rows = [(tuple(p), tuple(r)) for batch in backend.batches for p, r in batch]
    assert len(rows) == 24 and set(rows) <= sampled
