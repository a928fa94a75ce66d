"""``AglRayPPOTrainer``: VERL 0.9's V1 PPO trainer (``verl.trainer.ppo.v1``) whose ``fit`` runs the agl training loop
(validation included), and the task runner that builds it inside VERL's Ray driver."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import ray
from omegaconf import OmegaConf, open_dict
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1 import PPOTrainerSync

from agl_bridge.store.client import StoreClient
from agl_bridge.training.loop import LoopConfig, TrainingLoop
from agl_bridge.training.rollout_correction import resolve_rollout_correction
from agl_bridge.training.task_files import load_tasks
from agl_bridge.verl import cpu
from agl_bridge.verl.backend import VerlBackend
from agl_bridge.verl.tq_batch import StepBatches, TransferQueueBatches

__all__ = [
    "AglRayPPOTrainer",
    "AglTaskRunner",
    "agl_token",
    "loop_config",
    "max_staleness",
    "rollout_correction",
    "val_sampling",
]


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
        max_staleness=max_staleness(config),
    )


def max_staleness(config: Any) -> int:
    """The staleness bound of agl's asynchronous loop — the one setting, taken from agl's key or VERL's.

    ``agl.max_staleness`` k, when set, decides (0: synchronous). Left null, VERL's V1 keys decide: its
    ``trainer.v1.trainer_mode`` ``sync`` is k = 0, and an asynchronous mode takes VERL's staleness cap
    ``trainer.v1.sampler.max_off_policy_threshold`` t, the number of weight versions a group may span: k = t - 1
    (a group trained by the weights it was enqueued under spans 1). ``AglTaskRunner`` writes VERL's keys back to match
    (``apply_staleness``), so VERL's recorded config says what runs."""
    v1 = config.trainer.get("v1") or {}
    mode = str(v1.get("trainer_mode", "sync"))
    if mode == "separate_async":
        raise ValueError(
            "trainer.v1.trainer_mode=separate_async (standalone rollout replicas, VERL's own agent loop) is not "
            "supported by the agl loop: its rollouts are agl runners behind the store. Use agl.max_staleness=k "
            "(colocated replicas; the runners keep generating while the actor updates)"
        )
    if mode not in ("sync", "colocate_async"):
        raise ValueError(f"unknown trainer.v1.trainer_mode {mode!r}: sync, colocate_async or separate_async")
    configured = config.agl.get("max_staleness")
    if configured is not None:
        k = int(configured)
        if k < 0:
            raise ValueError(f"agl.max_staleness must be >= 0, got {k}")
        if k == 0 and mode != "sync":
            raise ValueError(
                f"trainer.v1.trainer_mode={mode} asks for asynchronous training but agl.max_staleness=0: set "
                "agl.max_staleness to k > 0, or leave it null to take trainer.v1.sampler.max_off_policy_threshold - 1"
            )
        return k
    if mode == "sync":
        return 0
    threshold = (v1.get("sampler") or {}).get("max_off_policy_threshold")
    if threshold is None or int(threshold) < 2:
        raise ValueError(
            f"trainer.v1.trainer_mode={mode} needs a staleness bound for the agl loop: "
            "trainer.v1.sampler.max_off_policy_threshold >= 2, or agl.max_staleness=k"
        )
    return int(threshold) - 1


def apply_staleness(config: Any) -> None:
    """Writes ``max_staleness`` into both settings: ``agl.max_staleness`` k, VERL's ``trainer.v1.trainer_mode``
    (``sync`` for k = 0, else ``colocate_async``) and ``trainer.v1.sampler.max_off_policy_threshold`` k + 1."""
    k = max_staleness(config)
    with open_dict(config):
        config.agl.max_staleness = k
        config.trainer.v1.trainer_mode = "sync" if k == 0 else "colocate_async"
        config.trainer.v1.sampler.max_off_policy_threshold = k + 1


def rollout_correction(config: Any) -> dict[str, Any] | None:
    """The update's off-policy correction (``agl_bridge.training.rollout_correction``) from VERL's
    ``algorithm.rollout_correction``, ``agl.max_staleness`` and ``agl.rollout_correction``."""
    configured = config.algorithm.get("rollout_correction")
    settings = OmegaConf.to_container(configured, resolve=True) if configured is not None else None
    enabled = config.agl.get("rollout_correction")
    return resolve_rollout_correction(
        settings,  # type: ignore[arg-type]
        max_staleness(config),
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
        self.logger = self._tracking()
        async with StoreClient(str(agl.store), agl_token(self.config)) as client:
            loop = TrainingLoop(
                client, self._backend(), train, loop_config(self.config), val_dataset=val, metrics_sink=self.logger.log
            )
            await loop.run()
        if agl.get("summary"):
            write_summary(str(agl.summary), loop)

    def _validate(self) -> dict[str, float]:
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


class AglTaskRunner:
    """VERL 0.9's V1 task runner (``verl.trainer.main_ppo.TaskRunnerV1``) for the agl loop: it starts TransferQueue,
    builds ``AglRayPPOTrainer`` (which builds VERL's workers, resource pools, replicas and checkpoint engine) and runs
    its ``fit`` — without VERL's agent-loop manager, whose place agl's runners and store take."""

    def run(self, config: Any) -> None:
        import transfer_queue as tq
        from verl.utils.logging_utils import configure_verl_logging

        configure_verl_logging()
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
