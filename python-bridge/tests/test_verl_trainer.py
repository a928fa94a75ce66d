"""What of the VERL trainer runs on CPU: config composition on top of VERL's ppo_trainer, the loop settings, and the
step logic of VerlBackend against a stand-in for RayPPOTrainer's workers (the workers themselves need GPUs)."""

from __future__ import annotations

import asyncio
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")
pytest.importorskip("hydra")

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import RayPPOTrainer  # noqa: E402

from agl_bridge.advantage import compute_rollout_level_advantage  # noqa: E402
from agl_bridge.dataproto import ConvertOptions, to_dataproto  # noqa: E402
from agl_bridge.triplets import RolloutSamples, Triplet  # noqa: E402
from agl_bridge.verl import VerlBackend, compose_config  # noqa: E402
from agl_bridge.verl.trainer import (  # noqa: E402
    AglRayPPOTrainer,
    AglTaskRunner,
    load_tasks,
    loop_config,
    val_sampling,
)


def test_config_composes_on_top_of_verl_ppo_trainer():
    cfg = compose_config(
        [
            "agl.store=http://store:1",
            "actor_rollout_ref.rollout.n=8",
            "data.train_batch_size=16",
            "trainer.total_training_steps=3",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    # VERL's own tree is there, with our defaults and overrides on top.
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size > 0
    assert cfg.actor_rollout_ref.rollout.mode == "async"
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.data.filter_overlong_prompts is False
    assert cfg.agl.store == "http://store:1" and cfg.agl.llm_name == "main_llm"
    loop = loop_config(cfg)
    assert (loop.n, loop.tasks_per_step, loop.total_steps) == (8, 16, 3)
    assert loop.max_prompt_length == cfg.data.max_prompt_length
    assert loop.checkpoint_dir.endswith("/agl")


def test_trainer_and_task_runner_are_verl_subclasses():
    assert issubclass(AglRayPPOTrainer, RayPPOTrainer)
    assert AglRayPPOTrainer.fit is not RayPPOTrainer.fit
    from verl.trainer.main_ppo import TaskRunner

    assert issubclass(AglTaskRunner, TaskRunner)


class FakeWorkers:
    """Stands in for RayPPOTrainer: records the calls VerlBackend makes, in order."""

    def __init__(self, config):
        self.config = config
        self.global_steps = 5
        self.calls: list[str] = []
        self.use_reference_policy = False
        self.use_critic = False
        self.tokenizer = type("Tok", (), {"pad_token_id": 0})()
        self.llm_server_manager = type("M", (), {"get_addresses": lambda _: ["10.0.0.1:8000", "10.0.0.2:8000"]})()
        outer = self

        class Ckpt:
            def sleep_replicas(self):
                outer.calls.append("sleep")

            def update_weights(self, step):
                outer.calls.append(f"update_weights@{step}")

        self.checkpoint_manager = Ckpt()

    def _balance_batch(self, batch, metrics):
        self.calls.append("balance")

    def _compute_old_log_prob(self, batch):
        self.calls.append(f"old_log_prob[{len(batch)}]")
        old = torch.zeros_like(batch.batch["responses"], dtype=torch.float32)
        return DataProto.from_dict(tensors={"old_log_probs": old}), 0.0

    def _update_actor(self, batch):
        assert {"advantages", "old_log_probs", "response_mask"} <= set(batch.batch.keys())
        self.calls.append(f"update_actor[{len(batch)}]")
        return DataProto(meta_info={"metrics": {"actor/pg_loss": [0.5, 0.25]}})


def make_batch():
    rs = []
    for g, rewards in {"a": [1.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [0.0, 1.0, 0.0]}.items():
        for i, r in enumerate(rewards):
            rs.append(RolloutSamples(f"{g}{i}", g, [Triplet([5, 6], [7, 8])], final_reward=r))
    data, _ = to_dataproto(rs, ConvertOptions(pad_token_id=0))
    data, _ = compute_rollout_level_advantage(data, "grpo")
    return data


def test_verl_backend_step_order_shaping_and_resources():
    cfg = compose_config(
        [
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.rollout.n=3",
            "actor_rollout_ref.model.path=/models/tiny",
            "trainer.balance_batch=true",
        ]
    )
    workers = FakeWorkers(cfg)
    backend = VerlBackend(workers, proxy_url="http://proxy:4748/v1")
    metrics = backend.update_sync(make_batch())
    # 9 rows, mini-batches of 2 tasks x 3 rollouts: 6 rows kept, the zero-advantage group "b" dropped first.
    assert workers.calls == ["sleep", "balance", "old_log_prob[6]", "update_actor[6]", "update_weights@5"]
    assert metrics["training/n_sample_dropped/same_reward"] == 3 and metrics["actor/pg_loss"] == pytest.approx(0.375)
    assert workers.global_steps == 6
    resources = backend.resources()
    assert resources["main_llm"].WhichOneof("kind") == "proxy_llm"
    assert resources["main_llm"].proxy_llm.endpoint == "http://proxy:4748/v1"
    assert [resources[f"policy-{i}"].llm.endpoint for i in range(2)] == [
        "http://10.0.0.1:8000/v1",
        "http://10.0.0.2:8000/v1",
    ]
    assert resources["policy-0"].llm.model == "/models/tiny"
    # Without a proxy, the agents' LLM is the first replica.
    assert VerlBackend(workers).resources()["main_llm"].llm.endpoint == "http://10.0.0.1:8000/v1"


def test_verl_backend_skips_a_step_with_too_few_rows():
    cfg = OmegaConf.merge(compose_config(["actor_rollout_ref.actor.ppo_mini_batch_size=8"]))
    workers = FakeWorkers(cfg)
    metrics = VerlBackend(workers).update_sync(make_batch())
    assert metrics["training/skipped_step"] == 1.0 and workers.calls == []


# -- validation ------------------------------------------------------------------------------------------------


def test_validation_settings_come_from_verl_keys():
    cfg = compose_config(
        [
            "agl.val_dataset=/data/val.jsonl",
            "trainer.test_freq=5",
            "trainer.val_before_train=false",
            "actor_rollout_ref.rollout.val_kwargs.n=4",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    loop = loop_config(cfg)
    assert (loop.test_freq, loop.val_before_train, loop.val_only, loop.val_n) == (5, False, False, 4)
    # VERL's default val_kwargs (do_sample false): greedy validation.
    assert loop.val_sampling == {"temperature": 0.0} and loop.val_timeout is None
    sampled = compose_config(
        ["actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.val_kwargs.temperature=0.6"]
    )
    assert val_sampling(sampled) == {"temperature": 0.6}
    same = compose_config(
        [
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            "actor_rollout_ref.rollout.temperature=1.0",
        ]
    )
    assert val_sampling(same) is None  # the training snapshot already samples that way
    # VERL's own defaults: validation before training, never periodically.
    default = loop_config(compose_config())
    assert (default.test_freq, default.val_before_train, default.val_n) == (-1, True, 1)


def test_val_tasks_load_from_jsonl_and_parquet(tmp_path):
    import pandas as pd

    (tmp_path / "val.jsonl").write_text('{"q": 1}\n\n{"q": 2}\n')
    pd.DataFrame(
        {"prompt": [[{"role": "user", "content": "hi"}]], "data_source": ["gsm"], "extra_info": [{"index": 3}]}
    ).to_parquet(tmp_path / "val.parquet")
    assert load_tasks(str(tmp_path / "val.jsonl")) == [{"q": 1}, {"q": 2}]
    rows = load_tasks([str(tmp_path / "val.parquet"), str(tmp_path / "val.jsonl")])
    assert rows[0] == {"prompt": [{"role": "user", "content": "hi"}], "data_source": "gsm", "extra_info": {"index": 3}}
    assert rows[1:] == [{"q": 1}, {"q": 2}]
    json.dumps(rows)  # plain JSON values, ready to be rollout inputs


def test_verl_tracking_logs_the_loop_metrics(capsys):
    cfg = compose_config(["trainer.logger=[console]", "actor_rollout_ref.model.path=/models/tiny"])
    trainer = AglRayPPOTrainer.__new__(AglRayPPOTrainer)
    trainer.config = cfg
    logger = trainer._tracking()
    logger.log(data={"val/reward_mean": 0.375, "val/reward_best@2": 0.625, "val/a/n": 4.0}, step=0)
    assert "val/reward_mean:0.375" in capsys.readouterr().out


class FakeAglTrainer(AglRayPPOTrainer):
    """AglRayPPOTrainer over FakeWorkers' stand-ins for VERL's workers (no Ray, no GPU), whose Tracking logger is
    a recorder."""

    def __init__(self, config):  # RayPPOTrainer.__init__ builds worker groups: not here
        fake = FakeWorkers(config)
        self.__dict__.update(fake.__dict__)
        self.global_steps = 0
        self.logged: list[tuple[dict, int]] = []
        self._fake = fake

    def _tracking(self):
        logged = self.logged
        return type("Recorder", (), {"log": lambda _, data, step: logged.append((dict(data), step))})()

    def _balance_batch(self, batch, metrics):
        self.calls.append("balance")

    def _compute_old_log_prob(self, batch):
        return FakeWorkers._compute_old_log_prob(self, batch)

    def _update_actor(self, batch):
        return FakeWorkers._update_actor(self, batch)

    def _save_checkpoint(self):
        self.calls.append("save")

    def _load_checkpoint(self):
        self.calls.append("load")


async def test_verl_trainer_validates_through_the_store_and_logs_to_tracking(store_address, tmp_path):
    from scripted import ScriptedAgents, all_rollouts

    from agl_bridge.client import StoreClient

    (tmp_path / "train.jsonl").write_text('{"rewards": [1.0, 0.0]}\n' * 4)
    (tmp_path / "val.jsonl").write_text('{"rewards": [1.0, 0.0]}\n{"rewards": [0.5]}\n{"rewards": [null]}\n')
    cfg = compose_config(
        [
            f"agl.store={store_address}",
            f"agl.train_dataset={tmp_path / 'train.jsonl'}",
            f"agl.val_dataset={tmp_path / 'val.jsonl'}",
            "agl.proxy=http://proxy:4748/v1",
            "agl.resources_id=verl-val",
            "agl.rollout_timeout=60",
            "agl.collect_timeout=30",
            "trainer.total_training_steps=2",
            "trainer.test_freq=1",
            "trainer.val_before_train=true",
            "trainer.balance_batch=false",
            f"trainer.default_local_dir={tmp_path / 'ckpt'}",
            "data.train_batch_size=2",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.rollout.val_kwargs.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            "actor_rollout_ref.model.path=/models/tiny",
        ]
    )
    trainer = FakeAglTrainer(cfg)
    agents = ScriptedAgents(store_address, "verl-val")
    task = asyncio.create_task(agents.run())
    try:
        await trainer._fit()
        async with StoreClient(store_address) as client:
            rollouts = await all_rollouts(client)
        runs = list(agents.runs)
        # VERL's _validate hook outside fit: the same validation, metrics only.
        alone = await trainer._validate_async()
    finally:
        task.cancel()
    # Weights pushed to the (asleep) replicas before the first publication, as VERL's fit does; then per step.
    assert trainer.calls[0] == "update_weights@0"
    assert trainer.calls.count("sleep") == 2 and trainer.calls[-2:] == ["update_weights@1", "save"]
    # Validation before training and after each step (test_freq 1), logged with that step's metrics.
    assert [step for _, step in trainer.logged] == [0, 1, 2]
    for metrics, step in trainer.logged:
        # Per rollout: 1, 0 | 0.5, 0.5 | none (0), none (0): mean 2/6; best of 2: (1 + 0.5 + 0) / 3.
        assert metrics["val/n"] == 6 and metrics["val/reward_mean"] == pytest.approx(2 / 6)
        assert metrics["val/reward_best@2"] == pytest.approx(0.5)
        assert metrics["val/policy_version"] == step + 1
        assert ("actor/pg_loss" in metrics) == (step > 0)
    # VERL's val_kwargs default: greedy, from the val snapshot; training at rollout.temperature.
    val_runs = [r for r in runs if r["mode"] == "val"]
    assert len(val_runs) == 18 and {(r["resources_id"], r["temperature"]) for r in val_runs} == {("verl-val-val", 0.0)}
    train_runs = [r for r in runs if r["mode"] == "train"]
    assert {r["temperature"] for r in train_runs} == {float(cfg.actor_rollout_ref.rollout.temperature)}
    assert sorted(r.mode for r in rollouts) == [1] * 8 + [2] * 18
    assert alone["val/n"] == 6 and alone["val/reward_mean"] == pytest.approx(2 / 6)
    assert alone["val/policy_version"] == 4  # published once more by the hook
