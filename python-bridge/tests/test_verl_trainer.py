"""What of the VERL trainer runs on CPU: config composition on top of VERL's ppo_trainer, the loop settings, and the
step logic of VerlBackend against a stand-in for RayPPOTrainer's workers (the workers themselves need GPUs)."""

from __future__ import annotations

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
from agl_bridge.verl.trainer import AglRayPPOTrainer, AglTaskRunner, loop_config  # noqa: E402


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
