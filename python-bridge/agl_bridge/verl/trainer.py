"""``AglRayPPOTrainer``: VERL's ``RayPPOTrainer`` whose ``fit`` runs the agl training loop (validation included), and
the ``TaskRunner`` that builds it inside VERL's Ray driver."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import ray
from omegaconf import OmegaConf
from verl.trainer import main_ppo
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from agl_bridge.store.client import StoreClient
from agl_bridge.training.loop import LoopConfig, TrainingLoop
from agl_bridge.training.rollout_correction import resolve_rollout_correction
from agl_bridge.training.task_files import load_tasks
from agl_bridge.verl import cpu
from agl_bridge.verl.backend import VerlBackend

__all__ = ["AglRayPPOTrainer", "AglTaskRunner", "agl_token", "loop_config", "rollout_correction", "val_sampling"]


def val_sampling(config: Any) -> dict[str, Any] | None:
    """How validation rollouts sample, from VERL's ``actor_rollout_ref.rollout.val_kwargs``: greedy (temperature 0)
    unless ``do_sample``, else its temperature and top_p. None when that is how training samples anyway."""
    rollout = config.actor_rollout_ref.rollout
    kwargs = rollout.get("val_kwargs")
    if kwargs is None:
        return None
    if not kwargs.get("do_sample", False):
        return {"temperature": 0.0}
    sampling: dict[str, Any] = {"temperature": float(kwargs.get("temperature", rollout.temperature))}
    top_p = float(kwargs.get("top_p", 1.0))
    if top_p < 1.0:
        sampling["top_p"] = top_p
    if sampling == {"temperature": float(rollout.temperature)}:
        return None
    return sampling


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
        triplet_options=dict(agl.triplet_options) if agl.get("triplet_options") else None,
        rollout_timeout=float(agl.rollout_timeout),
        collect_timeout=float(agl.collect_timeout),
        checkpoint_dir=str(config.trainer.default_local_dir) + "/agl",
        test_freq=int(config.trainer.test_freq),
        val_before_train=bool(config.trainer.get("val_before_train", True)),
        val_only=bool(config.trainer.get("val_only", False)),
        val_n=int(config.actor_rollout_ref.rollout.val_kwargs.get("n", 1)),
        val_sampling=val_sampling(config),
        val_timeout=float(agl.val_timeout) if agl.get("val_timeout") is not None else None,
        # The loop checkpoints (step, cursor, and VERL's own checkpoint through VerlBackend.save) exactly when VERL's
        # fit would: trainer.save_freq > 0 and a multiple of it, or the last step; -1 (VERL's default): never.
        save_freq=int(config.trainer.get("save_freq", -1)),
        resume=str(config.trainer.get("resume_mode", "auto")) != "disable",
        max_staleness=int(agl.get("max_staleness", 0)),
    )


def rollout_correction(config: Any) -> dict[str, Any] | None:
    """The update's off-policy correction (``agl_bridge.training.rollout_correction``) from VERL's
    ``algorithm.rollout_correction``, ``agl.max_staleness`` and ``agl.rollout_correction``."""
    configured = config.algorithm.get("rollout_correction")
    settings = OmegaConf.to_container(configured, resolve=True) if configured is not None else None
    enabled = config.agl.get("rollout_correction")
    return resolve_rollout_correction(
        settings,  # type: ignore[arg-type]
        int(config.agl.get("max_staleness", 0)),
        None if enabled is None else bool(enabled),
    )


def agl_token(config: Any) -> str | None:
    """The store's token (also the LLM proxy's): ``agl.token``, else ``$AGL_TOKEN`` (what ``agl train --token``
    sets for the processes it starts)."""
    return config.agl.get("token") or os.environ.get("AGL_TOKEN") or None


def write_summary(path: str, loop: TrainingLoop) -> None:
    """The run's summary (``TrainingLoop.summary``: VERL's metrics per step included) as JSON, as ``python -m
    agl_bridge.local --summary`` writes it; the reward plot and the initial and final reward go to stderr."""
    Path(path).write_text(json.dumps(loop.summary()))


class AglRayPPOTrainer(RayPPOTrainer):
    """Keeps VERL's workers, replicas, weight sync and checkpoints; replaces ``fit`` (and with it VERL's agent-loop
    rollout) by the agl loop: rollouts run by agl runners against the published replicas, triplets from the store.
    Validation (``_validate``) runs the ``agl.val_dataset`` tasks as ``val`` rollouts through the same store and
    runners; its metrics go, with each step's, to VERL's ``Tracking`` (``trainer.logger``)."""

    def fit(self) -> None:  # noqa: D102 - documented on the class
        asyncio.run(self._fit())

    def _tracking(self) -> Any:
        from verl.utils.tracking import Tracking

        return Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )

    def _backend(self) -> VerlBackend:
        agl = self.config.agl
        return VerlBackend(
            self,
            llm_name=str(agl.llm_name),
            proxy_url=agl.proxy,
            max_ppo_update_times=agl.max_ppo_update_times,
            proxy_token=agl_token(self.config),
            drain_timeout=float(agl.get("drain_timeout", 60.0)),
            rollout_correction=rollout_correction(self.config),
        )

    def _datasets(self) -> tuple[list[Any], list[Any]]:
        agl = self.config.agl
        if not agl.train_dataset:
            raise ValueError("agl.train_dataset (a JSONL file of task inputs) is required")
        val = load_tasks(agl.val_dataset) if agl.get("val_dataset") else []
        return load_tasks(agl.train_dataset), val

    async def _fit(self) -> None:
        agl = self.config.agl
        train, val = self._datasets()
        self.global_steps = 0
        logger = self._tracking()
        async with StoreClient(str(agl.store), agl_token(self.config)) as client:
            loop = TrainingLoop(
                client, self._backend(), train, loop_config(self.config), val_dataset=val, metrics_sink=logger.log
            )
            await loop.run()
        if agl.get("summary"):
            write_summary(str(agl.summary), loop)

    def _validate(self, merged: bool = False) -> dict[str, float]:
        """VERL's validation hook, through the agl store: publishes the replicas, runs ``agl.val_dataset`` as
        ``val`` rollouts and returns the metrics (nothing is trained). ``fit`` validates by itself; this is for
        callers outside it (it runs its own event loop)."""
        return asyncio.run(self._validate_async())

    async def _validate_async(self) -> dict[str, float]:
        agl = self.config.agl
        train, val = self._datasets()
        if not val:
            raise ValueError("agl.val_dataset (task inputs, JSONL or Parquet) is required to validate")
        async with StoreClient(str(agl.store), agl_token(self.config)) as client:
            loop = TrainingLoop(client, self._backend(), train, loop_config(self.config), val_dataset=val)
            loop.step = int(getattr(self, "global_steps", 0))
            await loop.publish()
            return (await loop.validate()).metrics


class AglTaskRunner(main_ppo.TaskRunner):
    """VERL's ``TaskRunner`` (worker roles, resource pools, tokenizer, datasets) building ``AglRayPPOTrainer``.

    On CPU (``agl_bridge.verl.cpu.is_cpu``) it swaps in the CPU subclasses of VERL's pieces: the actor worker with a
    gloo process group and resource pools of CPU bundles; everything else is VERL's own."""

    def run(self, config: Any) -> None:
        main_ppo.RayPPOTrainer = AglRayPPOTrainer  # type: ignore[misc] - TaskRunner.run builds the trainer by name
        super().run(config)

    def add_actor_rollout_worker(self, config: Any) -> Any:
        actor_rollout_cls, worker_group_cls = super().add_actor_rollout_worker(config)
        if not cpu.is_cpu(config):
            return actor_rollout_cls, worker_group_cls
        cpu.install()
        worker = cpu.cpu_actor_rollout_worker()
        for role in list(self.role_worker_mapping):
            if str(role).startswith("actor"):
                self.role_worker_mapping[role] = ray.remote(worker)
        return worker, worker_group_cls

    def init_resource_pool_mgr(self, config: Any) -> Any:
        manager = super().init_resource_pool_mgr(config)
        if not cpu.is_cpu(config):
            return manager
        return cpu.cpu_resource_pool_manager(manager.resource_pool_spec, manager.mapping)
