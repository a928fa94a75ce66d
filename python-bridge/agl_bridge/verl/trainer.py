"""``AglRayPPOTrainer``: VERL 0.9's V1 PPO trainer (``verl.trainer.ppo.v1``) whose ``fit`` runs the agl training loop
(validation included), and the task runner that builds it inside VERL's Ray driver."""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from omegaconf import OmegaConf, open_dict
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1 import PPOTrainerSync

from agl_bridge.errors import ConfigError
from agl_bridge.log import configure_logging
from agl_bridge.store.client import StoreClient
from agl_bridge.training.loop import TrainingLoop
from agl_bridge.training.report import write_summary
from agl_bridge.training.task_files import load_tasks
from agl_bridge.verl import cpu
from agl_bridge.verl.backend import VerlBackend
from agl_bridge.verl.settings import agl_token, apply_staleness, loop_config, rollout_correction
from agl_bridge.verl.tq_batch import StepBatches, TransferQueueBatches

__all__ = ["AglRayPPOTrainer", "AglTaskRunner"]


class AglRayPPOTrainer(PPOTrainerSync):
    """VERL 0.9's V1 trainer (its ``sync`` hooks) with VERL's workers, replicas, weight sync and checkpoints; ``fit``
    is the agl loop instead of VERL's agent loop and replay buffer: rollouts run by agl runners against the published
    replicas, triplets from the store, each step's rows through VERL's V1 phases (``VerlBackend``). Validation
    (``_validate``) runs the ``agl.val_dataset`` tasks as ``val`` rollouts through the same store and runners; its
    metrics go, with each step's, to VERL's ``Tracking`` (``trainer.logger``).

    On CPU (``agl_bridge.verl.cpu.is_cpu``) its resource pools are CPU bundles and its actor worker starts a gloo
    process group; everything else is VERL's own."""

    # Where VerlBackend puts each step's rows for VERL's V1 phases.
    step_batches: StepBatches = TransferQueueBatches()
    # Set by VERL's _init_resource_pool_mgr (replaced on CPU).
    resource_pool_manager: Any

    def init(self) -> None:
        """VERL's ``_setup`` (workers, replicas, checkpoint engine) without its own resume or first weight push: the
        agl loop resumes from the VERL checkpoint paired with its own (``VerlBackend.load``), then pushes the weights
        (``VerlBackend.start``)."""
        self._agl_in_setup = True
        try:
            self._setup()
        finally:
            self._agl_in_setup = False

    def _load_checkpoint(self) -> None:
        if getattr(self, "_agl_in_setup", False):
            self.global_steps = 0
            return
        super()._load_checkpoint()

    def _init_resource_pool_mgr(self) -> None:
        super()._init_resource_pool_mgr()
        if not cpu.is_cpu(self.config):
            return
        cpu.install()
        worker = ray.remote(cpu.cpu_actor_rollout_worker())
        for role in list(self.role_worker_mapping):
            if role != Role.Critic:
                self.role_worker_mapping[role] = worker
        manager = self.resource_pool_manager
        self.resource_pool_manager = cpu.cpu_resource_pool_manager(manager.resource_pool_spec, manager.mapping)

    def fit(self, agent_loop_manager: Any = None) -> None:  # noqa: D102 - documented on the class
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
        self.logger = self._tracking()
        async with StoreClient(str(agl.store), agl_token(self.config)) as client:
            loop = TrainingLoop(
                client, self._backend(), train, loop_config(self.config), val_dataset=val, metrics_sink=self.logger.log
            )
            await loop.run()
        if agl.get("summary"):
            # As ``python -m agl_bridge.local --summary`` writes it: the JSON (VERL's metrics per step included) and
            # the reward curve beside it.
            title = f"agl VERL trainer: reward per step ({self.config.actor_rollout_ref.model.path})"
            write_summary(str(agl.summary), loop.summary(), title=title)

    def _validate(self) -> dict[str, float]:
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


class AglTaskRunner:
    """VERL 0.9's V1 task runner (``verl.trainer.main_ppo.TaskRunnerV1``) for the agl loop: it starts TransferQueue,
    builds ``AglRayPPOTrainer`` (which builds VERL's workers, resource pools, replicas and checkpoint engine) and runs
    its ``fit`` — without VERL's agent-loop manager, whose place agl's runners and store take."""

    def run(self, config: Any) -> None:
        import transfer_queue as tq
        from verl.utils.logging_utils import configure_verl_logging

        configure_verl_logging()
        # The Ray process VERL runs this in: the bridge's log lines need their format here too.
        configure_logging()
        apply_staleness(config)
        with open_dict(config):
            config.transfer_queue.enable = True
        OmegaConf.resolve(config)
        tq.init(config.transfer_queue)
        try:
            trainer = AglRayPPOTrainer(config=config)
            trainer.init()
            trainer.fit()
        finally:
            tq.close()
