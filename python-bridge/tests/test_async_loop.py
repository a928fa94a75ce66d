"""Asynchronous training (``LoopConfig.max_staleness``) against the real store server: agents that answer from a
script, some slowed on purpose (a call served by old weights, finished late) or spanning a weight swap (two calls,
the second after the next version is published); the staleness bound per call, carried groups, ``max_staleness`` 0
unchanged, and a trainer that dies mid-step and restarts training every finished group once. Also the off-policy
correction of the local trainer's update (VERL's truncated importance weights)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

from rollouts import rollout, triplet  # noqa: E402
from scripted import RecordingBackend  # noqa: E402

from agl_bridge.gen.agl.v1 import types_pb2  # noqa: E402
from agl_bridge.store.client import StoreClient  # noqa: E402
from agl_bridge.store.convert import from_struct, from_value, make_span  # noqa: E402
from agl_bridge.training.advantage import compute_rollout_level_advantage  # noqa: E402
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto  # noqa: E402
from agl_bridge.training.loop import LoopConfig, TrainingLoop  # noqa: E402
from agl_bridge.training.rollout_correction import resolve_rollout_correction  # noqa: E402

POLICY = "res-async"


class PacedAgents:
    """Answers every claimed rollout concurrently with one LLM-call span (token ids, stamped with the policy version
    it read, as the LLM proxy stamps a call) and a reward. Task fields: ``hold`` k — the call is served by the
    version current when the rollout starts, and the rollout finishes only once k more versions are published (a
    straggler); ``swap`` — a second call, made after the next version is published and stamped with it."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        async with StoreClient(self.address) as client:
            while True:
                for rollout_msg in await client.dequeue(limit=64, worker_id="paced", wait_seconds=0.5):
                    task = asyncio.create_task(self._answer(client, rollout_msg))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)

    async def _version(self, client: StoreClient) -> int:
        return (await client.get_resources(POLICY)).version

    async def _after(self, client: StoreClient, version: int) -> int:
        while (current := await self._version(client)) < version:
            await asyncio.sleep(0.05)
        return current

    async def _answer(self, client: StoreClient, rollout_msg: types_pb2.Rollout) -> None:
        rollout_id, attempt_id = rollout_msg.rollout_id, rollout_msg.latest_attempt.attempt_id
        task: dict[str, Any] = from_value(rollout_msg.input)
        served = [await self._version(client)]
        if task.get("swap"):
            served.append(await self._after(client, served[0] + 1))
        if task.get("hold"):
            await self._after(client, served[0] + int(task["hold"]))
        spans = [
            make_span(
                rollout_id,
                attempt_id,
                "openai.chat.completion",
                {
                    "gen_ai.operation.name": "chat",
                    "agl.llm.source": "openai-fetch",
                    "agl.llm.prompt_token_ids": [1, 2, 3 + turn],
                    "agl.llm.response_token_ids": [4, 5 + turn],
                    "agl.llm.resources_id": POLICY,
                    "agl.llm.resources_version": version,
                },
            )
            for turn, version in enumerate(served)
        ]
        spans.append(
            make_span(
                rollout_id,
                attempt_id,
                "agentlightning.annotation",
                {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": float(task["r"])},
            )
        )
        await client.add_spans(spans)
        await client.update_attempt(rollout_id, attempt_id, "succeeded")


class VersionRecordingBackend(RecordingBackend):
    """Records, per update, each row's rollout id and the version that served its call; ``fail_at`` k makes the
    k-th update (0-based) die before it trains (a killed trainer)."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, int, int]]] = []
        self.fail_at = fail_at

    async def update(self, data: Any) -> dict[str, float]:
        nt = data.non_tensor_batch
        rows = list(zip(nt["rollout_id_list"], nt["turn_index_list"], nt["resources_version_list"], strict=True))
        if self.fail_at is not None and len(self.rows) == self.fail_at:
            self.rows.append([(str(r), int(t), int(v)) for r, t, v in rows])
            raise RuntimeError("killed mid-update")
        self.rows.append([(str(r), int(t), int(v)) for r, t, v in rows])
        return await super().update(data)


def _tasks(first: list[dict[str, Any]], count: int = 64) -> list[dict[str, Any]]:
    return first + [{"r": float(i % 2)} for i in range(count - len(first))]


def _loop(address: str, backend: Any, dataset: list[Any], steps: int, staleness: int, ckpt: Path | None = None):
    config = LoopConfig(
        total_steps=steps,
        tasks_per_step=2,
        n=2,
        resources_id=POLICY,
        rollout_timeout=60,
        checkpoint_dir=str(ckpt) if ckpt else None,
        max_response_length=4,
        max_staleness=staleness,
    )
    return TrainingLoop(StoreClient(address), backend, dataset, config)


async def _with_agents(address: str, body: Any) -> Any:
    agents = PacedAgents(address)
    runner = asyncio.create_task(agents.run())
    try:
        return await body()
    finally:
        runner.cancel()
        for task in list(agents.tasks):
            task.cancel()


def _history(ckpt: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ckpt / "history.jsonl").read_text().splitlines()]


async def test_no_call_older_than_the_bound_is_trained_and_stragglers_are_dropped(store_address, tmp_path):
    backend = VersionRecordingBackend()
    loop = _loop(store_address, backend, _tasks([{"r": 1.0, "hold": 2}]), 5, 1, tmp_path / "ck")

    async def body():
        history = await loop.run()
        page = await loop.client.query_rollouts(limit=1000)
        await loop.client.close()
        return history, {r.rollout_id for r in page.rollouts if "hold" in from_value(r.input)}

    history, held = await _with_agents(store_address, body)
    # v1 serves the weights after 0 updates, v2 after 1, ...: a row served by v was (step - (v - 1)) updates stale.
    for step, rows in enumerate(backend.rows):
        assert rows and all(step - (v - 1) <= 1 for _, _, v in rows), (step, rows)
    trained = {r for rows in backend.rows for r, _, _ in rows}
    assert held and not held & trained, "the straggler's calls, served 2 updates earlier, were trained"
    lines = _history(tmp_path / "ck")
    assert held <= {r for line in lines for r in line["dropped_rollout_ids"]}
    assert sum(r.metrics["async/groups_dropped_stale"] for r in history) == 1
    assert all(r.n_rollouts == 4 for r in history), "every step trains tasks_per_step complete groups"
    # Generation ran ahead: some step trained calls one update stale (served while the previous step trained).
    assert sum(r.metrics.get("async/staleness/1", 0) for r in history) > 0
    assert all("timing_s/generation_idle" in r.log_metrics() and "timing_s/wait" in r.log_metrics() for r in history)


async def test_a_rollout_spanning_a_swap_is_trained_with_per_call_versions(store_address):
    backend = VersionRecordingBackend()
    loop = _loop(store_address, backend, _tasks([{"r": 1.0, "swap": True}]), 3, 1)

    async def body():
        history = await loop.run()
        await loop.client.close()
        return history

    history = await _with_agents(store_address, body)
    by_rollout: dict[str, list[tuple[int, int, int]]] = {}
    for step, rows in enumerate(backend.rows):
        for rollout_id, turn, version in rows:
            by_rollout.setdefault(rollout_id, []).append((step, turn, version))
    spanning = [sorted(rows) for rows in by_rollout.values() if len(rows) == 2]
    assert len(spanning) == 2, by_rollout  # the swap task's two rollouts, each two calls
    for rows in spanning:
        (step, turn0, v0), (_, turn1, v1) = rows
        assert (turn0, turn1) == (0, 1) and v1 == v0 + 1, rows
        assert step - (v0 - 1) == 1 and step - (v1 - 1) == 0, "trained once its second call was served"
    assert history[1].metrics["async/staleness/1"] >= 2


async def test_max_staleness_0_is_the_synchronous_loop(store_address, tmp_path):
    backend = VersionRecordingBackend()
    dataset = _tasks([])
    loop = _loop(store_address, backend, dataset, 3, 0, tmp_path / "ck")

    async def body():
        history = await loop.run()
        page = await loop.client.query_rollouts(limit=1000)
        await loop.client.close()
        return history, list(page.rollouts)

    history, rollouts_ = await _with_agents(store_address, body)
    # Each step trains exactly its own tasks' groups, all served by the version published before it; nothing ahead.
    by_step: dict[int, set[str]] = {}
    for r in rollouts_:
        by_step.setdefault(int(from_struct(r.metadata)["step"]), set()).add(r.rollout_id)
    assert [set(rid for rid, _, _ in rows) for rows in backend.rows] == [by_step[0], by_step[1], by_step[2]]
    assert [r.versions_seen for r in history] == [[1], [2], [3]]
    assert not (tmp_path / "ck" / "inflight.json").exists()
    assert not any(k.startswith("async/") for r in history for k in r.metrics)


async def test_killed_mid_step_and_restarted_trains_every_finished_group_once(store_address, tmp_path):
    ckpt = tmp_path / "ck"
    dataset = _tasks([])

    async def body():
        first = _loop(store_address, VersionRecordingBackend(fail_at=2), dataset, 5, 1, ckpt)
        with pytest.raises(RuntimeError, match="killed"):
            await first.run()
        lost_step = {r for r, _, _ in first.backend.rows[2]}
        enqueued = set(first.scheduler.ledger.rollout_ids()) | lost_step
        await first.client.wait_for_rollouts(sorted(enqueued), 30)  # they finish while the trainer is down
        await first.client.close()
        second = _loop(store_address, VersionRecordingBackend(), dataset, 5, 1, ckpt)
        history = await second.run()
        await second.client.close()
        return lost_step, enqueued, second, history

    lost_step, enqueued, second, history = await _with_agents(store_address, body)
    assert [r.step for r in history] == [2, 3, 4]
    lines = _history(ckpt)
    assert [line["step"] for line in lines] == [0, 1, 2, 3, 4]
    trained = [r for line in lines for r in line["rollout_ids"]]
    assert len(trained) == len(set(trained)) == 5 * 4, "a rollout was trained twice"
    assert lost_step <= set(trained), "the groups of the step the kill interrupted were lost"
    # Every group in flight at the kill (all finished by the restart) was trained, dropped, or is still carried.
    accounted = set(trained) | {r for line in lines for r in line["dropped_rollout_ids"]}
    accounted |= set(second.scheduler.ledger.rollout_ids())
    assert enqueued <= accounted


def test_local_update_weights_its_loss_by_truncated_importance_ratios():
    from agl_bridge.local import tasks
    from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer
    from agl_bridge.local.policy import GrpoConfig, Policy

    def policy(correction: dict[str, Any] | None) -> Policy:
        tokenizer = build_word_tokenizer(tasks.vocabulary())
        model = build_tiny_model(tokenizer, TinyModelConfig(hidden_size=16, layers=1, heads=2, intermediate_size=32))
        return Policy(model, tokenizer, GrpoConfig(lr=1e-2, rollout_correction=correction))

    # The engine's log-probs far from the trainer's (as from weights several updates old): weights clipped at 2.
    batch = [
        rollout(f"r{i}", "g", [triplet([1, 2, 3], [4 + i, 5], logprobs=[-8.0, -0.01])], final_reward=float(i % 2))
        for i in range(4)
    ]

    def data():
        d, _ = to_dataproto(batch, ConvertOptions(pad_token_id=0))
        return compute_rollout_level_advantage(d, "grpo")[0]

    correction = resolve_rollout_correction(None, max_staleness=1)
    assert correction == {"rollout_is": "token", "rollout_is_threshold": 2.0}
    assert resolve_rollout_correction(None, max_staleness=0) is None
    assert resolve_rollout_correction(None, max_staleness=1, enabled=False) is None
    corrected, plain = policy(correction), policy(None)
    plain.model.load_state_dict(corrected.model.state_dict())
    m_corrected, m_plain = corrected.update_sync(data()), plain.update_sync(data())
    assert m_corrected["rollout_corr/rollout_is_max"] <= 2.0 + 1e-6
    assert m_corrected["rollout_corr/rollout_is_min"] < 1.0
    assert not any(k.startswith("rollout_corr/") for k in m_plain)
    assert m_corrected["actor/pg_loss"] != pytest.approx(m_plain["actor/pg_loss"])
    corrected.close()
    plain.close()


async def test_training_a_copy_lets_the_served_model_generate_during_the_update():
    from agl_bridge.local import tasks
    from agl_bridge.local.model import TinyModelConfig, build_tiny_model, build_word_tokenizer
    from agl_bridge.local.policy import GrpoConfig, Policy

    def policy() -> Policy:
        tokenizer = build_word_tokenizer(tasks.vocabulary())
        model = build_tiny_model(tokenizer, TinyModelConfig(hidden_size=16, layers=1, heads=2, intermediate_size=32))
        return Policy(model, tokenizer, GrpoConfig(lr=1e-2, ppo_epochs=30))

    batch = [rollout(f"r{i}", "g", [triplet([1, 2, 3], [4 + i, 5])], final_reward=float(i % 2)) for i in range(8)]

    def data():
        d, _ = to_dataproto(batch, ConvertOptions(pad_token_id=0))
        return compute_rollout_level_advantage(d, "grpo")[0]

    shared, copied = policy(), policy()
    copied.model.load_state_dict(shared.model.state_dict())
    copied.train_on_copy()
    before = {k: v.clone() for k, v in copied.model.state_dict().items()}
    update = asyncio.create_task(copied.update(data()))
    await asyncio.sleep(0.05)
    # The served model answers while the copy trains, with the weights it had.
    await copied.generate([1, 2, 3], 2, temperature=1.0)
    assert not update.done(), "the generation waited for the update"
    assert all(torch.equal(before[k], v) for k, v in copied.model.state_dict().items())
    assert copied.weights_version == 0
    await update
    # Then it has exactly the weights the same update on the served model itself gives.
    await shared.update(data())
    assert copied.weights_version == shared.weights_version == 1
    trained = shared.model.state_dict()
    assert all(torch.allclose(trained[k], v) for k, v in copied.model.state_dict().items())
    assert all(torch.equal(v, copied.train_model.state_dict()[k]) for k, v in copied.model.state_dict().items())
    shared.close()
    copied.close()


async def test_a_stop_during_the_enqueue_records_the_rollouts_the_store_took(store_address, tmp_path):
    ckpt = tmp_path / "ck"
    loop = _loop(store_address, VersionRecordingBackend(), _tasks([]), 1, 0, ckpt)
    await loop.publish()  # the policy's resources exist, and the channel is open: the enqueue is one call in flight
    enqueue = asyncio.ensure_future(loop._enqueue(0))
    for _ in range(3):  # _enqueue starts its call, the call is sent
        await asyncio.sleep(0)
    enqueue.cancel()  # as SIGTERM cancels the trainer's task
    with pytest.raises(asyncio.CancelledError):
        await enqueue
    pending = loop.run_dir.pending(0)
    assert pending is not None and len(pending) == 2 * 2, "the rollouts the store took were not recorded"
    stored = await loop.client.query_rollouts()
    assert {r.rollout_id for r in stored.rollouts} == set(pending)
    await loop.client.close()
