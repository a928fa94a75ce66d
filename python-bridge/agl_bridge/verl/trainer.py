"""``AglRayPPOTrainer``: VERL's ``RayPPOTrainer`` whose ``fit`` runs the agl training loop, and the ``TaskRunner`` that
builds it inside VERL's Ray driver."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from verl.trainer import main_ppo
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from agl_bridge.client import StoreClient
from agl_bridge.loop import LoopConfig, TrainingLoop
from agl_bridge.verl.backend import VerlBackend

__all__ = ["AglRayPPOTrainer", "AglTaskRunner", "load_tasks", "loop_config"]


def load_tasks(path: str) -> list[Any]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def loop_config(config: Any) -> LoopConfig:
    """The loop's settings from the Hydra config (VERL keys where VERL has them, ``agl.*`` otherwise)."""
    agl, data = config.agl, config.data
    return LoopConfig(
        total_steps=int(config.trainer.total_training_steps or 1),
        tasks_per_step=int(data.train_batch_size),
        n=int(config.actor_rollout_ref.rollout.n),
        adv_estimator=str(config.algorithm.adv_estimator),
        norm_adv_by_std_in_grpo=bool(config.algorithm.get("norm_adv_by_std_in_grpo", True)),
        max_prompt_length=int(data.max_prompt_length),
        max_response_length=int(data.max_response_length),
        reward_fillna=float(agl.reward_fillna),
        resources_id=str(agl.resources_id),
        llm_name=str(agl.llm_name),
        triplet_source=str(agl.triplet_source),
        rollout_timeout=float(agl.rollout_timeout),
        collect_timeout=float(agl.collect_timeout),
        checkpoint_dir=str(config.trainer.default_local_dir) + "/agl",
    )


class AglRayPPOTrainer(RayPPOTrainer):
    """Keeps VERL's workers, replicas, weight sync and checkpoints; replaces ``fit`` (and with it VERL's agent-loop
    rollout) by the agl loop: rollouts run by agl runners against the published replicas, triplets from the store."""

    def fit(self) -> None:  # noqa: D102 - documented on the class
        asyncio.run(self._fit())

    async def _fit(self) -> None:
        agl = self.config.agl
        if not agl.train_dataset:
            raise ValueError("agl.train_dataset (a JSONL file of task inputs) is required")
        self.global_steps = 0
        backend = VerlBackend(
            self, llm_name=str(agl.llm_name), proxy_url=agl.proxy, max_ppo_update_times=agl.max_ppo_update_times
        )
        async with StoreClient(str(agl.store), agl.token) as client:
            loop = TrainingLoop(client, backend, load_tasks(str(agl.train_dataset)), loop_config(self.config))
            await loop.run()


class AglTaskRunner(main_ppo.TaskRunner):
    """VERL's ``TaskRunner`` (worker roles, resource pools, tokenizer, datasets) building ``AglRayPPOTrainer``."""

    def run(self, config: Any) -> None:
        main_ppo.RayPPOTrainer = AglRayPPOTrainer  # type: ignore[misc] - TaskRunner.run builds the trainer by name
        super().run(config)
