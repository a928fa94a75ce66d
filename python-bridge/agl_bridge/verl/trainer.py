"""``AglRayPPOTrainer``: VERL's ``RayPPOTrainer`` whose ``fit`` runs the agl training loop (validation included), and
the ``TaskRunner`` that builds it inside VERL's Ray driver."""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from omegaconf import OmegaConf
from verl.trainer import main_ppo
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from agl_bridge.errors import ConfigError
from agl_bridge.log import configure_logging
from agl_bridge.store.client import StoreClient
from agl_bridge.training.loop import TrainingLoop
from agl_bridge.training.report import write_summary
from agl_bridge.training.task_files import load_tasks
from agl_bridge.verl import cpu
from agl_bridge.verl.backend import VerlBackend
from agl_bridge.verl.settings import agl_token, loop_config, rollout_correction

__all__ = ["AglRayPPOTrainer", "AglTaskRunner"]


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
            llm_name=loop_config(self.config).llm_name,
            proxy_url=agl.proxy,
            max_ppo_update_times=agl.max_ppo_update_times,
            proxy_token=agl_token(self.config),
            drain_timeout=float(agl.get("drain_timeout", 60.0)),
            rollout_correction=rollout_correction(self.config),
        )

    def _datasets(self) -> tuple[list[Any], list[Any]]:
        agl = self.config.agl
        if not agl.train_dataset:
            raise ConfigError("agl.train_dataset (a JSONL file of task inputs) is required")
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
            # As ``python -m agl_bridge.local --summary`` writes it: the JSON (VERL's metrics per step included) and
            # the reward curve beside it.
            title = f"agl VERL trainer: reward per step ({self.config.actor_rollout_ref.model.path})"
            write_summary(str(agl.summary), loop.summary(), title=title)

    def _validate(self, merged: bool = False) -> dict[str, float]:
        """VERL's validation hook, through the agl store: publishes the replicas, runs ``agl.val_dataset`` as
        ``val`` rollouts and returns the metrics (nothing is trained). ``fit`` validates by itself; this is for
        callers outside it (it runs its own event loop)."""
        return asyncio.run(self._validate_async())

    async def _validate_async(self) -> dict[str, float]:
        agl = self.config.agl
        train, val = self._datasets()
        if not val:
            raise ConfigError("agl.val_dataset (task inputs, JSONL or Parquet) is required to validate")
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
        # The Ray process VERL runs this in: the bridge's log lines need their format here too.
        configure_logging()
        main_ppo.RayPPOTrainer = AglRayPPOTrainer  # TaskRunner.run builds the trainer by this name
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
