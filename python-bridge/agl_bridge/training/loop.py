"""The training loop both trainers share: publish the policy, enqueue ``n`` rollouts per task as one group, wait,
collect triplets, build the ``DataProto``, compute rollout-level advantages, update the policy through a backend,
publish the next version, checkpoint, report — and validate (``agl_bridge.training.validation``) before training and
every ``test_freq`` steps, with VERL's semantics.

A backend owns the weights: ``LocalBackend`` (one CPU process) or the VERL backend (Ray workers). The loop owns the
store side and the bookkeeping that makes a killed trainer resume without training any rollout twice, in the run's
folder (``run_dir.RunDirectory``): the batch of a step is recorded (``pending.json``) before it is
enqueued-and-waited, and a checkpoint (weights, optimizer, step, triplet cursor) is written atomically after the
update — every step, or every ``save_freq`` steps (VERL's ``trainer.save_freq``); ``history.jsonl`` lists the rollouts
each step trained on. A resume goes back to the last checkpoint: steps trained after it are lost with the weights they
made, so their ``history.jsonl`` lines are dropped and they are trained again (on fresh rollouts, or on the pending
ones of the step the kill interrupted).

With ``max_staleness`` k > 0 the loop is asynchronous: ``scheduler.AsyncScheduler`` keeps the runners working ahead
and picks what each step trains on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from verl.utils.profiler import simple_timer

from agl_bridge.errors import ConfigError, DataError
from agl_bridge.log import get_logger
from agl_bridge.store.client import StoreClient
from agl_bridge.store.triplet_source import StreamTripletSource, TripletSource
from agl_bridge.store.triplets import RolloutTriplets, mode_name
from agl_bridge.training.advantage import compute_rollout_level_advantage, drop_marked_rows
from agl_bridge.training.config import LoopConfig
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto
from agl_bridge.training.interfaces import MetricsSink, PolicyBackend, StepResult
from agl_bridge.training.prompt_templates import load_prompt_templates
from agl_bridge.training.report import format_progress, format_validation, run_summary
from agl_bridge.training.rollouts import Rollouts
from agl_bridge.training.run_dir import RunDirectory, record_ids
from agl_bridge.training.scheduler import AsyncScheduler, Gathered
from agl_bridge.training.validation import ValidationResult, run_validation

__all__ = ["LoopConfig", "MetricsSink", "PolicyBackend", "StepResult", "TrainingLoop", "ValidationResult"]

log = get_logger("training")


class TrainingLoop:
    """Drives ``backend`` against the store at ``client``."""

    def __init__(
        self,
        client: StoreClient,
        backend: PolicyBackend,
        dataset: Sequence[Any],
        config: LoopConfig,
        *,
        source: TripletSource | None = None,
        val_dataset: Sequence[Any] | None = None,
        metrics_sink: MetricsSink | None = None,
    ) -> None:
        if not dataset:
            raise ConfigError("the dataset is empty")
        if config.val_only and not val_dataset:
            raise ConfigError("val_only needs a validation dataset")
        self.client, self.backend, self.dataset, self.config = client, backend, list(dataset), config
        self.templates = load_prompt_templates(config.prompt_templates)
        self.val_dataset = list(val_dataset or [])
        self.source = source or StreamTripletSource(client, options=config.triplet_options)
        self.metrics_sink = metrics_sink
        self.step = 0
        self.version = 0
        self.history: list[StepResult] = []
        self.val_history: list[ValidationResult] = []
        # With val_sampled_n: the validations with training's sampling, beside val_history's.
        self.val_sampled_history: list[ValidationResult] = []
        self.run_dir = RunDirectory(config.checkpoint_dir, keep_checkpoints=config.keep_checkpoints)
        self.rollouts = Rollouts(client, config)
        self.scheduler = (
            AsyncScheduler(self.rollouts, config, self.run_dir, self.tasks_for) if config.max_staleness > 0 else None
        )
        # When the runners last ran out of the trainer's work (wall clock): generation idles from then to the next
        # enqueue.
        self._generation_done_at: float | None = None

    # -- checkpoints -------------------------------------------------------------------------------------------

    def resume(self) -> bool:
        """Loads the latest checkpoint, if any: weights, optimizer, step, triplet cursor. ``history.jsonl`` is made
        to match it: lines of steps after it (trained, then lost with their weights: ``save_freq`` > 1, or no
        checkpoint at all) are dropped, since those steps are trained again."""
        if self.run_dir.path is None:
            return False
        checkpoint = self.run_dir.latest() if self.config.resume else None
        if checkpoint is None:
            self._restore_scheduler(None, self.run_dir.recorded_ids() if self.config.resume else None)
            self._truncate_history(0)
            return False
        state = checkpoint.state
        self.backend.load(checkpoint.directory)
        self.step = int(state["step"])
        self.version = int(state.get("version", 0))
        self.source.load_state(state.get("source", {}))
        done = self.run_dir.recorded_ids()
        self._truncate_history(self.step)
        # A kill between the checkpoint and its history line: the checkpoint's record of what it trained completes it.
        last = state.get("last_trained")
        if last is not None and last["step"] not in self.run_dir.history_steps():
            self.run_dir.append_history(last)
            done |= record_ids(last)
        self._restore_scheduler(state.get("inflight"), done)
        log.info(
            "resumed from %s at step %d (last published version %d)", checkpoint.directory, self.step, self.version
        )
        return True

    def _restore_scheduler(self, checkpointed: dict[str, Any] | None, done: set[str] | None) -> None:
        if self.scheduler is not None:
            self.scheduler.restore(checkpointed, done, self.step)

    def _truncate_history(self, step: int) -> None:
        dropped = self.run_dir.truncate_history(step)
        if dropped:
            log.info(
                "dropped %d history.jsonl lines of steps after the checkpoint (step %d): they are trained again",
                dropped,
                step,
            )

    def _due(self, freq: int, steps_done: int) -> bool:
        """VERL's cadence for ``save_freq`` and ``test_freq``: ``freq > 0`` and a multiple of it, or the last step."""
        return freq > 0 and steps_done > 0 and (steps_done % freq == 0 or steps_done >= self.config.total_steps)

    def saves_after(self, steps_done: int) -> bool:
        """Whether the loop checkpoints once ``steps_done`` steps are trained (VERL's ``trainer.save_freq``)."""
        return self._due(self.config.save_freq, steps_done)

    def validates_after(self, steps_done: int) -> bool:
        """Whether validation runs once ``steps_done`` steps are trained (VERL's ``trainer.test_freq``)."""
        return bool(self.val_dataset) and self._due(self.config.test_freq, steps_done)

    def _save(self, last_trained: dict[str, Any] | None) -> None:
        state = {
            "step": self.step,
            "version": self.version,
            "source": self.source.state(),
            "inflight": self.scheduler.ledger.state() if self.scheduler is not None else None,
            "last_trained": last_trained,
        }
        self.run_dir.save_checkpoint(self.step, self.backend.save, state)

    # -- store side --------------------------------------------------------------------------------------------

    def resources(self) -> dict[str, Any]:
        """What a version of the policy publishes: the backend's LLM resources and the ``prompt_templates``."""
        llms = self.backend.resources()
        if clash := sorted(llms.keys() & self.templates.keys()):
            raise ConfigError(f"prompt_templates: {', '.join(clash)} already name the policy's LLM resources")
        return {**llms, **self.templates}

    async def publish(self) -> int:
        """Publishes the backend's endpoints (and the prompt templates) as the next version of ``resources_id``;
        returns the version."""
        update = await self.client.update_resources(self.config.resources_id, self.resources(), create_if_missing=True)
        self.version = update.version
        if self.scheduler is not None:
            self.scheduler.published(self.version, self.step)
        return self.version

    def tasks_for(self, step: int) -> list[Any]:
        k = self.config.tasks_per_step
        return [self.dataset[(step * k + i) % len(self.dataset)] for i in range(k)]

    async def _enqueue(self, step: int) -> list[str]:
        pending = self.run_dir.pending(step)
        if pending is not None:
            log.info("step %d: reusing its %d rollouts enqueued before a restart", step, len(pending))
            return pending
        enqueuing = asyncio.ensure_future(
            self.rollouts.enqueue(
                self.tasks_for(step),
                self.config.n,
                mode="train",
                resources_id=self.config.resources_id,
                metadata={"step": step},
            )
        )
        try:
            groups = await asyncio.shield(enqueuing)
        except asyncio.CancelledError:
            # A stop during the call: the store may already hold the rollouts, so the call is let finish (within its
            # deadline; a second stop ends the wait) and they are recorded, for the restart to train them.
            await asyncio.wait([enqueuing])
            if not enqueuing.cancelled() and enqueuing.exception() is None:
                self.run_dir.set_pending(step, [r.rollout_id for group in enqueuing.result() for r in group])
            raise
        ids = [r.rollout_id for group in groups for r in group]
        self.run_dir.set_pending(step, ids)
        return ids

    # -- validation --------------------------------------------------------------------------------------------

    async def validate(self) -> ValidationResult:
        """Runs the validation set against the current policy (``validation.run_validation``); the result is kept
        in ``val_history`` (and ``validation.jsonl`` in the run's folder). With ``val_sampled_n``, a second run
        with training's sampling goes beside it (``val_sampled_history``; its metrics join the result's as
        ``val_sampled/...``)."""
        if not self.val_dataset:
            raise ConfigError("no validation dataset")
        cfg, resources = self.config, self.resources()

        def run(config: LoopConfig) -> Any:
            return run_validation(
                self.rollouts, resources, self.val_dataset, config, step=self.step, version=self.version
            )

        # Both at once when sampled too: the engine batches their calls together.
        sampled_cfg = replace(cfg, val_sampling=None, val_n=cfg.val_sampled_n) if cfg.val_sampled_n > 0 else None
        result, sampled = await asyncio.gather(run(cfg), run(sampled_cfg) if sampled_cfg else asyncio.sleep(0))
        self.val_history.append(result)
        self.run_dir.append_validation(asdict(result))
        log.info("%s", format_validation(result, cfg.total_steps))
        if sampled is not None:
            self.val_sampled_history.append(sampled)
            self.run_dir.append_validation({**asdict(sampled), "sampled": True})
            log.info("sampled %s", format_validation(sampled, cfg.total_steps))
            result.metrics.update({f"val_sampled/{k[4:]}": v for k, v in sampled.metrics.items() if k[:4] == "val/"})
        return result

    def _emit(self, metrics: dict[str, float], step: int) -> None:
        if self.metrics_sink is not None and metrics:
            self.metrics_sink(metrics, step)

    # -- one step ----------------------------------------------------------------------------------------------

    async def run_step(self) -> StepResult | None:
        """Runs step ``self.step``; returns its result (``None`` when no trainable row came back)."""
        step = self.step
        timings: dict[str, float] = {}
        if self.scheduler is not None:
            gathered = await self.scheduler.gather(step, self.version, timings)
            return await self._finish_step(step, gathered, timings)
        if self._generation_done_at is not None:
            timings["generation_idle"] = asyncio.get_running_loop().time() - self._generation_done_at
        with simple_timer("enqueue", timings):
            ids = await self._enqueue(step)
        # The triplets are read while the rollouts run, so that after the wait only the last ones are left to read.
        reading = asyncio.ensure_future(
            self.source.collect(ids, self.config.rollout_timeout + self.config.collect_timeout)
        )
        try:
            with simple_timer("wait", timings):
                finished = await self.rollouts.wait(ids)
            self._generation_done_at = asyncio.get_running_loop().time()
            with simple_timer("collect", timings):
                samples = await self._collect(reading, ids, finished)
        finally:
            reading.cancel()
        return await self._finish_step(step, Gathered(samples), timings)

    async def _collect(
        self, reading: asyncio.Future[list[RolloutTriplets]], ids: list[str], finished: list[str]
    ) -> list[RolloutTriplets]:
        """The triplets of ``finished``: what ``reading`` (the read ahead of all ``ids``) got, and the rest from the
        cursor on a new stream, which answers at once (the read ahead's following stream would see them only at its
        next poll of the store); within ``collect_timeout``."""
        if len(finished) == len(ids) and reading.done() and not reading.cancelled() and reading.exception() is None:
            return reading.result()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        return await self.source.collect(finished, self.config.collect_timeout)

    async def _finish_step(self, step: int, gathered: Gathered, timings: dict[str, float]) -> StepResult | None:
        """Trains ``gathered`` as step ``step``, publishes the new weights, checkpoints and records the step."""
        cfg = self.config
        with simple_timer("before_update", timings):
            await self.backend.before_update()
        try:
            result = await self._train(step, gathered.samples, timings)
        except BaseException:
            # The step's own error is what the caller sees: failing to undo before_update too is only logged.
            try:
                await self.backend.after_update()
            except Exception as error:  # noqa: BLE001 - reported, not raised over the step's error
                log.error("%s", error)
            raise
        await self.backend.after_update()
        self.step += 1
        with simple_timer("publish", timings):
            await self.publish()
        if result is not None:
            result.version = self.version
            result.metrics.update(gathered.metrics)
        trained_ids = [s.rollout_id for s in gathered.samples]
        record = {**asdict(result), "rollout_ids": trained_ids} if result else {"step": step, "rollout_ids": []}
        if self.scheduler is not None:
            record["dropped_rollout_ids"] = gathered.dropped_rollout_ids
        if self.saves_after(self.step):
            with simple_timer("checkpoint", timings):
                self._save(record)
        self.run_dir.append_history(record)
        if self.scheduler is not None:
            self.scheduler.save()
        if result is not None:
            self.history.append(result)
            if cfg.log_every and (step % cfg.log_every == 0 or self.step == cfg.total_steps):
                log.info("%s", format_progress(result, cfg.total_steps, self.scheduler is not None))
        return result

    async def _train(self, step: int, samples: list[RolloutTriplets], timings: dict[str, float]) -> StepResult | None:
        cfg = self.config
        # Only train-mode rollouts are training data (validation and test rollouts are scored, never trained on).
        train = [s for s in samples if mode_name(s.mode) in ("train", "")]
        if len(train) < len(samples):
            log.info("step %d: left out %d rollouts that are not of mode train", step, len(samples) - len(train))
            samples = train
        with simple_timer("convert", timings):
            options = ConvertOptions(
                pad_token_id=self.backend.pad_token_id,
                max_prompt_length=cfg.max_prompt_length,
                max_response_length=cfg.max_response_length,
                reward_fillna=cfg.reward_fillna,
            )
            try:
                data, stats = to_dataproto(samples, options, meta_info={"global_steps": step})
            except DataError as error:
                log.info("step %d: skipped (%s)", step, error)
                return None
            data, adv_metrics = compute_rollout_level_advantage(
                data, cfg.adv_estimator, norm_adv_by_std_in_grpo=cfg.norm_adv_by_std_in_grpo
            )
            data, dropped = drop_marked_rows(data)
        with simple_timer("update", timings):
            metrics = await self.backend.update(data) if len(data) else {}
        metrics.update(stats.metrics())
        metrics.update(adv_metrics)
        metrics["training/n_sample_dropped/marked"] = float(dropped)
        versions = sorted({t.resources_version for s in samples for t in s.triplets})
        response_tokens = int(data.batch["response_mask"].sum()) if len(data) else 0
        return StepResult(
            step=step,
            version=0,
            reward_mean=stats.reward_mean,
            n_rollouts=stats.n_rollouts,
            n_rows=stats.n_rows,
            response_tokens=response_tokens,
            versions_seen=versions,
            timings=timings,
            metrics=metrics,
        )

    def summary(self) -> dict[str, Any]:
        """The run so far as the trainers' summary JSON (``report.run_summary``)."""
        return run_summary(self.history, self.val_history, self.val_sampled_history)

    async def run(self) -> list[StepResult]:
        """Resumes if a checkpoint exists, publishes the current policy, validates before training (when asked),
        and trains until ``total_steps``, validating every ``test_freq`` steps."""
        cfg = self.config
        self.resume()
        await self.backend.start()
        version = await self.publish()
        log.info("published %s v%d; training from step %d", cfg.resources_id, version, self.step)
        if self.val_dataset and (cfg.val_before_train or cfg.val_only):
            self._emit((await self.validate()).metrics, self.step)
            if cfg.val_only:
                return self.history
        while self.step < cfg.total_steps:
            timings: dict[str, float] = {}
            with simple_timer("step", timings):
                result = await self.run_step()
            if result is not None:
                result.timings["step"] = timings["step"]
            metrics = result.log_metrics() if result is not None else {"training/skipped_step": 1.0}
            note = self.rollouts.guard.step_ended(self.step - 1, result is not None and result.n_rows > 0)
            if note:
                log.warning("%s", note)
            if self.validates_after(self.step):
                metrics.update((await self.validate()).metrics)
            self._emit(metrics, self.step)
            await asyncio.sleep(0)
        self.run_dir.clear_pending()
        if self.scheduler is not None:
            await self.scheduler.cancel_lookahead()
        return self.history
