"""Validation in the shared training loop: val-mode rollouts at VERL's frequency (before training, every test_freq
steps, the last step), run against the current policy version, rewards aggregated as computed by hand here, and never
part of a training batch. Against the real store server, with scripted agents and a recording backend (no model)."""

from __future__ import annotations

import asyncio
import json
import logging
import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("verl")

from rollouts import rollout, triplet  # noqa: E402
from scripted import RecordingBackend, ScriptedAgents, all_rollouts  # noqa: E402

from agl_bridge.store.client import StoreClient  # noqa: E402
from agl_bridge.store.convert import from_struct, llm_resource  # noqa: E402
from agl_bridge.store.triplets import final_reward, mode_name  # noqa: E402
from agl_bridge.training.loop import LoopConfig, TrainingLoop  # noqa: E402
from agl_bridge.training.validation import collect_rollouts, val_metrics, val_resources  # noqa: E402

# Four validation tasks, two rollouts each. Rewards per rollout: T0 1, 0; T1 0.5, 0.5; T2 none (-> 0), 1;
# T3 fails twice (-> 0, 0). Mean 3/8; best of 2 per task: (1 + 0.5 + 1 + 0) / 4; source a: 2/4, source b: 1/4.
VAL_TASKS = [
    {"rewards": [1.0, 0.0], "data_source": "a"},
    {"rewards": [0.5, 0.5], "data_source": "a"},
    {"rewards": [None, 1.0], "data_source": "b"},
    {"fail": True, "data_source": "b"},
]
VAL_REWARDS = [1.0, 0.0, 0.5, 0.5, 0.0, 1.0, 0.0, 0.0]
EXPECTED = {
    "val/n": 8.0,
    "val/n_tasks": 4.0,
    "val/n_finished": 8.0,
    "val/n_succeeded": 6.0,
    "val/n_rollouts_w_reward": 5.0,
    "val/n_rollouts_w_trace": 6.0,
    "val/reward_mean": 0.375,
    # population std: ((0.625² · 2) + (0.375² · 4) + (0.125² · 2)) / 8 = 0.171875
    "val/reward_std": math.sqrt(0.171875),
    "val/reward_best@2": 0.625,
    "val/turn_count": 1.0,
    "val/response_length": 2.0,
    "val/a/reward_mean": 0.5,
    "val/a/n": 4.0,
    "val/b/reward_mean": 0.25,
    "val/b/n": 4.0,
}


def test_val_metrics_by_hand():
    def s(rid, reward, status="succeeded", calls=1):
        return rollout(rid, "g", [triplet([1, 2], [3, 4, 5])] * calls, final_reward=reward, status=status)

    groups = [["r0", "r1"], ["r2", "r3"], ["r4", "r5"]]
    # r1 failed without reward, r3 never finished (absent), r5 has two calls.
    samples = {
        "r0": s("r0", 1.0),
        "r1": s("r1", None, "failed", calls=0),
        "r2": s("r2", 0.5),
        "r4": s("r4", 0.25),
        "r5": s("r5", 0.75, calls=2),
    }
    tasks = [{"data_source": "x"}, {"q": 1}, "plain string task"]
    m = val_metrics(tasks, groups, samples, reward_fillna=-1.0)
    rewards = [1.0, -1.0, 0.5, -1.0, 0.25, 0.75]  # unfinished and reward-less rollouts score the fill value
    assert m["val/n"] == 6 and m["val/n_tasks"] == 3
    assert m["val/reward_mean"] == pytest.approx(sum(rewards) / 6)
    assert m["val/reward_best@2"] == pytest.approx((1.0 + 0.5 + 0.75) / 3)
    assert (m["val/n_finished"], m["val/n_succeeded"], m["val/n_rollouts_w_reward"]) == (5, 4, 4)
    assert m["val/n_rollouts_w_trace"] == 4 and m["val/turn_count"] == pytest.approx(5 / 4)
    assert m["val/response_length"] == 3.0
    assert (m["val/x/reward_mean"], m["val/x/n"]) == (0.0, 2.0)
    assert not any(k.startswith("val/q") for k in m)
    # One rollout per task: no best@k.
    assert "val/reward_best@1" not in val_metrics(tasks[:1], [["r0"]], samples)


def test_val_resources_merge_sampling_and_leave_the_proxy_engines_alone():
    proxied = {
        "main_llm": llm_resource(
            "http://p/v1", "m", sampling_parameters={"temperature": 1.0, "max_tokens": 8}, proxy=True
        ),
        "policy": llm_resource("http://e/v1", "m", sampling_parameters={"temperature": 1.0}),
    }
    out = val_resources(proxied, {"temperature": 0.0})
    assert from_struct(out["main_llm"].proxy_llm.sampling_parameters) == {"temperature": 0.0, "max_tokens": 8}
    # The engines stay only in the training snapshot, which the proxy keeps following.
    assert "policy" not in out
    assert from_struct(proxied["main_llm"].proxy_llm.sampling_parameters)["temperature"] == 1.0  # not modified
    direct = {"main_llm": llm_resource("http://e/v1", "m", sampling_parameters={"temperature": 1.0})}
    assert from_struct(val_resources(direct, {"temperature": 0.0})["main_llm"].llm.sampling_parameters) == {
        "temperature": 0.0
    }


async def test_a_training_batch_never_takes_a_rollout_not_of_mode_train():
    backend = RecordingBackend()
    loop = TrainingLoop(StoreClient("http://127.0.0.1:9"), backend, [{}], LoopConfig())
    samples = [
        rollout("t0", "g", [triplet([1], [2])], final_reward=1.0, mode="train"),
        rollout("t1", "g", [triplet([1], [3])], final_reward=0.0, mode="train"),
        rollout("v0", "g", [triplet([1], [4])], final_reward=1.0, mode="val"),
    ]
    result = await loop._train(0, samples, {})
    assert backend.trained == [["t0", "t1"]] and result.n_rollouts == 2
    await loop.client.close()


def _config(resources_id: str, **overrides) -> LoopConfig:
    return LoopConfig(
        **{
            "total_steps": 3,
            "tasks_per_step": 2,
            "n": 2,
            "resources_id": resources_id,
            "rollout_timeout": 60,
            "collect_timeout": 30,
            "max_response_length": 4,
            **overrides,
        }
    )


async def test_loop_validates_before_training_and_every_test_freq_steps(store_address, tmp_path):
    agents = ScriptedAgents(store_address, "res-v")
    task = asyncio.create_task(agents.run())
    logged: list[tuple[dict[str, float], int]] = []
    backend = RecordingBackend()
    config = _config(
        "res-v", test_freq=2, val_n=2, val_sampling={"temperature": 0.0}, checkpoint_dir=str(tmp_path / "ck")
    )
    train_tasks = [{"rewards": [1.0, 0.0]}] * 4
    try:
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(
                client,
                backend,
                train_tasks,
                config,
                val_dataset=VAL_TASKS,
                metrics_sink=lambda m, step: logged.append((dict(m), step)),
            )
            history = await loop.run()
            rollouts = await all_rollouts(client)
            val_ids = [rid for v in loop.val_history for rid in v.rollout_ids]
            collected = await collect_rollouts(client, val_ids, 30)
            as_train = await collect_rollouts(client, val_ids, 30, mode="train")
    finally:
        task.cancel()
    assert [r.step for r in history] == [0, 1, 2] and backend.starts == 1

    # Before training (step 0), after step 2 (test_freq) and after step 3 (the last); each on the policy version of
    # that moment: v1 published at start, one more per step.
    assert [(v.step, v.version) for v in loop.val_history] == [(0, 1), (2, 3), (3, 4)]
    for v in loop.val_history:
        assert v.n == 8 and v.resources_id == "res-v-val"
        for key, value in EXPECTED.items():
            assert v.metrics[key] == pytest.approx(value), key
        assert v.metrics["val/policy_version"] == v.version
        runs = [r for r in agents.runs if r["rollout_id"] in set(v.rollout_ids)]
        assert {r["mode"] for r in runs} == {"val"} and {r["policy_version"] for r in runs} == {v.version}
        # Validation samples greedily from its own snapshot; training keeps temperature 1.
        assert {(r["resources_id"], r["temperature"]) for r in runs} == {("res-v-val", 0.0)}
    train_runs = [r for r in agents.runs if r["mode"] == "train"]
    assert {(r["resources_id"], r["temperature"]) for r in train_runs} == {("res-v", 1.0)}

    # In the store: 3 validations x 4 tasks x 2, and 3 steps x 2 tasks x 2; val rollouts named their policy version.
    modes = [r.mode for r in rollouts]
    assert modes.count(2) == 24 and modes.count(1) == 12 and len(rollouts) == 36  # ROLLOUT_MODE_VAL / _TRAIN
    train_ids = {r.rollout_id for r in rollouts if r.mode == 1}
    assert {from_struct(r.metadata)["policy_version"] for r in rollouts if r.mode == 2} == {1, 3, 4}

    # Every training batch is made of train rollouts only, and all of them were trained.
    trained = [rid for batch in backend.trained for rid in batch]
    assert set(trained) == train_ids and not set(trained) & set(val_ids)

    # Metrics reach the sink: validation alone at step 0, training at every step, validation merged at 2 and 3.
    assert [step for _, step in logged] == [0, 1, 2, 3]
    assert all(k.startswith(("val/", "timing_s/validation")) for k in logged[0][0])
    assert not any(k.startswith("val/") for k in logged[1][0])
    for metrics, step in logged[1:]:
        assert metrics["training/global_step"] == step and metrics["training/n_rollouts"] == 4
    assert logged[2][0]["val/reward_mean"] == pytest.approx(0.375) and logged[3][0]["val/n"] == 8
    lines = (tmp_path / "ck" / "validation.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 2, 3]

    # Read back from the triplet stream: every validation rollout, of mode val (none when asked for train ones), with
    # the rewards its metrics were computed from (a rollout without a reward scores reward_fillna, 0).
    assert set(collected) == set(val_ids) and as_train == {}
    for v in loop.val_history:
        assert {mode_name(collected[rid].mode) for rid in v.rollout_ids} == {"val"}
        rewards = [final_reward(collected[rid]) or 0.0 for rid in v.rollout_ids]
        assert sum(rewards) / len(rewards) == pytest.approx(v.reward_mean)


async def test_validation_off_and_val_only(store_address):
    agents = ScriptedAgents(store_address, "res-w")
    task = asyncio.create_task(agents.run())
    try:
        async with StoreClient(store_address) as client:
            # A validation set but neither val_before_train nor test_freq: no validation at all.
            off = TrainingLoop(
                client,
                RecordingBackend(),
                [{"rewards": [1.0, 0.0]}],
                _config("res-w", total_steps=1, val_before_train=False, test_freq=0),
                val_dataset=VAL_TASKS,
            )
            await off.run()
            assert off.val_history == [] and {r.mode for r in await all_rollouts(client)} == {1}
            # val_only: one validation on the published policy, no training step.
            backend = RecordingBackend()
            only = TrainingLoop(
                client,
                backend,
                [{"rewards": [1.0]}],
                _config("res-w", total_steps=5, val_only=True),
                val_dataset=VAL_TASKS[:2],
            )
            assert await only.run() == [] and backend.trained == []
            assert [(v.step, v.n, v.metrics["val/reward_mean"]) for v in only.val_history] == [(0, 2, 0.75)]
            # The training snapshot served it (no val_sampling).
            assert only.val_history[0].resources_id == "res-w"
            modes = [r.mode for r in await all_rollouts(client)]
            assert modes.count(1) == 4 and modes.count(2) == 2  # the first loop's step: 2 tasks x 2
    finally:
        task.cancel()
    with pytest.raises(ValueError, match="val_only"):
        TrainingLoop(StoreClient("http://127.0.0.1:9"), RecordingBackend(), [{}], LoopConfig(val_only=True))


async def test_validation_rollouts_in_flight_are_cancelled_when_the_trainer_stops(store_address, caplog):
    """Ctrl-C (the loop's task cancelled) during a validation: its rollouts, which no resumed trainer would read,
    are cancelled in the store instead of being left to the runners."""
    from agl_bridge.gen.agl.v1 import types_pb2

    caplog.set_level(logging.INFO, logger="agl_bridge")
    async with StoreClient(store_address) as client:
        loop = TrainingLoop(
            client,
            RecordingBackend(),
            [{"rewards": [1.0]}],
            _config("res-stop", val_n=2),
            val_dataset=VAL_TASKS[:2],
        )
        await loop.publish()
        # No agents: the rollouts stay queued until the trainer stops.
        task = asyncio.create_task(loop.validate())
        for _ in range(200):
            if len(await all_rollouts(client)) == 4:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        statuses = [types_pb2.RolloutStatus.Name(r.status) for r in await all_rollouts(client)]
    assert statuses == ["ROLLOUT_STATUS_CANCELLED"] * 4
    assert "stopping: cancelled 4 validation rollouts not finished yet" in caplog.messages


async def test_a_failed_update_is_the_error_the_caller_sees_even_when_after_update_fails_too(store_address, caplog):
    """The loop undoes ``before_update`` after a failed step; if that fails as well (say, the proxy is gone), it is
    logged and the step's own error still reaches the caller."""

    class Failing(RecordingBackend):
        async def update(self, data):
            raise RuntimeError("actor update failed")

        async def after_update(self) -> None:
            raise RuntimeError("could not resume the LLM proxy")

    agents = ScriptedAgents(store_address, "res-f")
    task = asyncio.create_task(agents.run())
    caplog.set_level(logging.INFO, logger="agl_bridge")
    try:
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(client, Failing(), [{"rewards": [1.0, 0.0]}] * 2, _config("res-f"))
            with pytest.raises(RuntimeError, match="actor update failed"):
                await loop.run()
    finally:
        task.cancel()
    assert any("could not resume the LLM proxy" in line for line in caplog.messages)


async def test_a_step_trains_the_groups_that_finished_when_others_outlast_rollout_timeout(store_address):
    # The loop reads the step's triplets while its rollouts run; those cancelled at rollout_timeout never come, and
    # the step trains the finished ones, each once.
    agents = ScriptedAgents(store_address, "res-part")
    task = asyncio.create_task(agents.run())
    backend = RecordingBackend()
    try:
        async with StoreClient(store_address) as client:
            dataset = [{"rewards": [1.0, 0.0]}, {"hang": True}]
            loop = TrainingLoop(client, backend, dataset, _config("res-part", total_steps=1, rollout_timeout=2))
            await loop.run()
            statuses = sorted(r.status for r in await all_rollouts(client))
    finally:
        task.cancel()
    assert statuses == [5, 5, 6, 6]  # two SUCCEEDED, two CANCELLED
    assert len(backend.trained) == 1 and len(set(backend.trained[0])) == len(backend.trained[0]) == 2


async def test_rollouts_that_outlast_rollout_timeout_are_cancelled_and_left_out(store_address, caplog):
    caplog.set_level(logging.INFO, logger="agl_bridge")
    async with StoreClient(store_address) as client:
        loop = TrainingLoop(client, RecordingBackend(), [{}], _config("res-late", n=3))
        await loop.publish()
        ids = await loop._enqueue(0)  # no runner claims them
        assert await loop.rollouts.wait(ids, timeout=0.5) == []
        statuses = {r.rollout_id: r.status for r in await all_rollouts(client) if r.rollout_id in set(ids)}
    assert len(ids) == 6 and set(statuses.values()) == {6}  # ROLLOUT_STATUS_CANCELLED
    assert "6 rollouts did not finish within 0 s: 6 cancelled" in caplog.messages


async def test_sampled_validation_beside_the_greedy_one_and_prompt_templates_published(store_address, tmp_path):
    """``val_sampled_n``: each validation is followed by one with training's sampling (the training snapshot), kept
    apart in the summary; ``prompt_templates`` reach every snapshot, training's and validation's."""
    template = tmp_path / "prompt.txt"
    template.write_text("Q: {question}\nA:\n")
    agents = ScriptedAgents(store_address, "res-s")
    task = asyncio.create_task(agents.run())
    config = _config(
        "res-s",
        total_steps=1,
        val_n=1,
        val_sampled_n=2,
        val_sampling={"temperature": 0.0},
        prompt_templates={"word_math": str(template)},
    )
    try:
        async with StoreClient(store_address) as client:
            loop = TrainingLoop(client, RecordingBackend(), [{"rewards": [1.0, 0.0]}], config, val_dataset=VAL_TASKS)
            await loop.run()
    finally:
        task.cancel()
    assert [(v.step, v.n) for v in loop.val_history] == [(0, 4), (1, 4)]
    assert [(v.step, v.n, v.resources_id) for v in loop.val_sampled_history] == [(0, 8, "res-s"), (1, 8, "res-s")]
    for v in loop.val_sampled_history:
        runs = [r for r in agents.runs if r["rollout_id"] in set(v.rollout_ids)]
        assert len({r["rollout_id"] for r in runs}) == 8 and {r["temperature"] for r in runs} == {1.0}
        assert v.metrics["val/reward_mean"] == pytest.approx(0.375)  # the scripted rewards, two per task
    greedy = {rid for v in loop.val_history for rid in v.rollout_ids}
    assert {r["temperature"] for r in agents.runs if r["rollout_id"] in greedy} == {0.0}
    assert {r["resources_id"] for r in agents.runs} == {"res-s", "res-s-val"}
    assert all(r["templates"] == {"word_math": "Q: {question}\nA:"} for r in agents.runs)
    summary = loop.summary()
    assert [v["n"] for v in summary["validation_sampled"]] == [8, 8] and len(summary["validation"]) == 2


def test_prompt_templates_that_cannot_be_read_are_refused(tmp_path):
    from agl_bridge.errors import ConfigError

    def loop(templates):
        return TrainingLoop(
            StoreClient("http://127.0.0.1:9"), RecordingBackend(), [{}], LoopConfig(prompt_templates=templates)
        )

    with pytest.raises(ConfigError, match="cannot read"):
        loop({"p": str(tmp_path / "missing.txt")})
    with pytest.raises(ConfigError, match='give {"name": "file"} pairs'):
        loop({"p": 3})
    (tmp_path / "big.txt").write_text("x" * (256 * 1024 + 1))
    with pytest.raises(ConfigError, match="over"):
        loop({"p": str(tmp_path / "big.txt")})
    (tmp_path / "ok.txt").write_text("Q: {question}")
    with pytest.raises(ConfigError, match="main_llm already name"):
        loop({"main_llm": str(tmp_path / "ok.txt")}).resources()
