"""The training loop both trainers share: publish the policy, enqueue ``n`` rollouts per task as one group, wait,
collect triplets, build the ``DataProto``, compute rollout-level advantages, update the policy through a backend,
publish the next version, checkpoint, report — and validate (``agl_bridge.training.validation``) before training and
every ``test_freq`` steps, with VERL's semantics.

A backend owns the weights: ``LocalBackend`` (one CPU process) or the VERL backend (Ray workers). The loop owns the
store side and the bookkeeping that makes a killed trainer resume without training any rollout twice: the batch of a
step is recorded (``pending.json``) before it is enqueued-and-waited, and a checkpoint (weights, optimizer, step,
triplet cursor) is written atomically after the update — every step, or every ``save_freq`` steps (VERL's
``trainer.save_freq``); ``history.jsonl`` lists the rollouts each step trained on. A resume goes back to the last
checkpoint: steps trained after it are lost with the weights they made, so their ``history.jsonl`` lines are dropped
and they are trained again (on fresh rollouts, or on the pending ones of the step the kill interrupted).

With ``max_staleness`` k > 0 the loop is asynchronous (``agl_bridge.training.staleness``): it keeps ``1 + k`` steps'
groups enqueued, so the runners generate while a step converts, updates, publishes and checkpoints; a step trains the
oldest ``tasks_per_step`` complete groups whose every call was served by weights at most k updates old, drops older
ones and carries the rest. ``inflight.json`` (and each checkpoint) holds the groups in flight, so a restarted trainer
trains the finished ones and waits for the others; ``history.jsonl`` also lists the dropped rollouts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from verl import DataProto

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.store.client import StoreClient
from agl_bridge.store.triplet_source import StreamTripletSource, TripletSource
from agl_bridge.store.triplets import RolloutTriplets, mode_name
from agl_bridge.training.advantage import compute_rollout_level_advantage, drop_marked_rows
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto
from agl_bridge.training.empty_steps import EmptyStepGuard
from agl_bridge.training.plot import reward_plot
from agl_bridge.training.staleness import GroupLedger, InflightGroup, call_versions, staleness_metrics
from agl_bridge.training.validation import ValidationResult, collect_rollouts, val_metrics, val_resources

__all__ = ["LoopConfig", "MetricsSink", "PolicyBackend", "StepResult", "TrainingLoop", "ValidationResult"]

# Asynchronous mode: how often the loop looks for groups that finished out of order while it waits for older ones.
_COMPLETE_POLL_S = 0.5

# Receives each step's metrics (training, and validation when it ran) with the step they belong to: VERL's
# ``Tracking.log(data, step)`` has this shape.
MetricsSink = Callable[[dict[str, float], int], None]


@dataclass
class LoopConfig:
    """What the loop does each step. ``dataset`` rows are task inputs (any JSON); step ``k`` takes rows
    ``k*tasks_per_step ...`` (cycling), so a resumed trainer sees the same tasks."""

    total_steps: int = 100
    tasks_per_step: int = 8
    n: int = 8
    adv_estimator: str = "grpo"
    norm_adv_by_std_in_grpo: bool = True
    max_prompt_length: int | None = 1024
    max_response_length: int | None = 1024
    reward_fillna: float = 0.0
    resources_id: str = "agl-policy"
    llm_name: str = "main_llm"
    # How the store's adapter builds triplets (``agl.v1.TripletOptions`` as JSON, e.g. ``{"mode":
    # "TRIPLET_MODE_TRAJECTORY"}``); None: its defaults (one triplet per LLM call, first-occurrence rewards).
    triplet_options: dict[str, Any] | None = None
    rollout_timeout: float = 600.0
    collect_timeout: float = 60.0
    max_attempts: int = 3
    # The store's watchdog times an attempt out after this long (its runner may have died with a trainer it shared a
    # process with, or hung); timed-out, failed and unresponsive attempts are retried up to ``max_attempts``.
    attempt_timeout: float = 120.0
    checkpoint_dir: str | None = None
    keep_checkpoints: int = 2
    # Checkpoint after step k (1-based) when save_freq > 0 and k is a multiple of it or the last step (VERL's
    # trainer.save_freq); 0 or -1: never. ``resume`` false: start from step 0 whatever the checkpoint directory holds
    # (VERL's trainer.resume_mode disable).
    save_freq: int = 1
    resume: bool = True
    log_every: int = 1
    # Validation, when the loop has a validation dataset (VERL's trainer.test_freq, val_before_train, val_only and
    # rollout.val_kwargs.n): after step k (1-based) when test_freq > 0 and k is a multiple of it or the last step;
    # before the first step when val_before_train; only that when val_only. ``val_sampling`` (e.g. {"temperature":
    # 0}) is merged over the published LLM resources' sampling parameters for validation rollouts, which then run
    # against their own snapshot ``{resources_id}-val`` (same endpoints and weights); None: the training snapshot.
    test_freq: int = 0
    val_before_train: bool = True
    val_only: bool = False
    val_n: int = 1
    val_sampling: dict[str, Any] | None = None
    val_timeout: float | None = None
    # Asynchronous training (``agl_bridge.training.staleness``): with max_staleness k > 0 the runners work on the next k
    # steps' groups while a step trains, and a step trains complete groups whose every call was served by weights at
    # most k updates older than the ones being updated (older groups are dropped and counted). 0: synchronous, each
    # step enqueues its tasks, waits for them and trains them.
    max_staleness: int = 0
    # Stop the run (``TrainingAborted``, with the rollouts' first errors) after this many steps in a row with
    # nothing to train; 0: never.
    max_empty_steps: int = 3


@dataclass
class StepResult:
    step: int
    version: int
    reward_mean: float
    n_rollouts: int
    n_rows: int
    response_tokens: int
    versions_seen: list[int]
    timings: dict[str, float]
    metrics: dict[str, float] = field(default_factory=dict)

    def log_metrics(self) -> dict[str, float]:
        """Everything about the step, for a metrics logger: the update's metrics, the batch's, timings."""
        out = dict(self.metrics)
        out["training/global_step"] = float(self.step + 1)
        out["training/reward_mean"] = self.reward_mean
        out["training/response_tokens"] = float(self.response_tokens)
        out["training/policy_version"] = float(self.version)
        out.update({f"timing_s/{k}": v for k, v in self.timings.items()})
        return out


class PolicyBackend(Protocol):
    """Owns the weights and the engines that serve them."""

    def resources(self) -> dict[str, types_pb2.Resource]:
        """The resources to publish (LLM endpoints serving the current weights)."""
        ...

    @property
    def pad_token_id(self) -> int: ...

    async def start(self) -> None:
        """Called once, after a resume and before the first publication: the engines must serve the current
        weights from here on (VERL pushes the actor's weights to its replicas, which ``init_workers`` left asleep)."""
        ...

    async def before_update(self) -> None:
        """Generation is over for this step (pause or drain engines)."""
        ...

    async def after_update(self) -> None:
        """The step's update is over (done, skipped for want of rows, failed or cancelled): undo what
        ``before_update`` did (``VerlBackend`` resumes the LLM proxy it paused)."""
        ...

    async def update(self, data: DataProto) -> dict[str, float]:
        """One policy update on a batch with ``advantages``; afterwards the engines serve the new weights."""
        ...

    def save(self, directory: Path) -> None: ...

    def load(self, directory: Path) -> None: ...


def _record_ids(record: dict[str, Any]) -> set[str]:
    """The rollouts a ``history.jsonl`` line accounts for: trained, or dropped as too stale."""
    return {*record.get("rollout_ids", []), *record.get("dropped_rollout_ids", [])}


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


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
        log: Callable[[str], None] | None = None,
        val_dataset: Sequence[Any] | None = None,
        metrics_sink: MetricsSink | None = None,
    ) -> None:
        if not dataset:
            raise ValueError("the dataset is empty")
        if config.val_n < 1:
            raise ValueError(f"val_n must be at least 1, got {config.val_n}")
        if config.val_only and not val_dataset:
            raise ValueError("val_only needs a validation dataset")
        if config.max_staleness < 0:
            raise ValueError(f"max_staleness must be 0 (synchronous) or more, got {config.max_staleness}")
        self.client, self.backend, self.dataset, self.config = client, backend, list(dataset), config
        self.val_dataset = list(val_dataset or [])
        self.source = source or StreamTripletSource(client, options=config.triplet_options)
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.metrics_sink = metrics_sink
        self.empty = EmptyStepGuard(config.max_empty_steps)
        self.step = 0
        self.version = 0
        self.history: list[StepResult] = []
        self.val_history: list[ValidationResult] = []
        self.ckpt = Path(config.checkpoint_dir) if config.checkpoint_dir else None
        # Asynchronous mode only: the groups enqueued and not yet trained (``agl_bridge.training.staleness``).
        self.ledger = GroupLedger()
        # When the runners last ran out of the trainer's work (wall clock): generation idles from then to the next
        # enqueue.
        self._generation_done_at: float | None = None

    # -- checkpoints -------------------------------------------------------------------------------------------

    def resume(self) -> bool:
        """Loads the latest checkpoint, if any: weights, optimizer, step, triplet cursor. ``history.jsonl`` is made
        to match it: lines of steps after it (trained, then lost with their weights: ``save_freq`` > 1, or no
        checkpoint at all) are dropped, since those steps are trained again."""
        if self.ckpt is None:
            return False
        if not self.config.resume or not (self.ckpt / "latest").exists():
            self._restore_ledger(None, self._recorded_ids() if self.config.resume else None)
            self._truncate_history(0)
            return False
        directory = self.ckpt / (self.ckpt / "latest").read_text().strip()
        state = json.loads((directory / "state.json").read_text())
        self.backend.load(directory)
        self.step = int(state["step"])
        self.version = int(state.get("version", 0))
        self.source.load_state(state.get("source", {}))
        done = self._recorded_ids()
        self._truncate_history(self.step)
        # A kill between the checkpoint and its history line: the checkpoint's record of what it trained completes it.
        last = state.get("last_trained")
        if last is not None and last["step"] not in self._history_steps():
            self._append_history(last)
            done |= _record_ids(last)
        self._restore_ledger(state.get("inflight"), done)
        self.log(f"[agl] resumed from {directory} at step {self.step} (last published version {self.version})")
        return True

    def _recorded_ids(self) -> set[str]:
        """Every rollout ``history.jsonl`` says was trained or dropped, steps after the checkpoint included."""
        if self.ckpt is None or not (self.ckpt / "history.jsonl").exists():
            return set()
        lines = (self.ckpt / "history.jsonl").read_text().splitlines()
        return {r for line in lines if line.strip() for r in _record_ids(json.loads(line))}

    def _restore_ledger(self, checkpointed: dict[str, Any] | None, done: set[str] | None) -> None:
        """Asynchronous mode: the groups in flight at the kill, from the checkpoint and ``inflight.json`` (newer),
        less those ``done`` (None: a fresh start, which forgets them)."""
        path = self.ckpt / "inflight.json" if self.ckpt is not None else None
        if done is None or path is None or self.config.max_staleness == 0:
            self.ledger = GroupLedger()
            return
        saved = [checkpointed] if checkpointed else []
        if path.exists():
            saved.append(json.loads(path.read_text()))
        self.ledger = GroupLedger.restore(saved, done, self.step)
        if self.ledger.groups:
            self.log(f"[agl] carried over {len(self.ledger.groups)} groups enqueued before the restart, not trained")

    def _truncate_history(self, step: int) -> None:
        """Drops the ``history.jsonl`` lines of steps ``step`` and later (atomically)."""
        if self.ckpt is None or not (self.ckpt / "history.jsonl").exists():
            return
        lines = [line for line in (self.ckpt / "history.jsonl").read_text().splitlines() if line.strip()]
        kept = [line for line in lines if int(json.loads(line)["step"]) < step]
        if len(kept) == len(lines):
            return
        tmp = self.ckpt / "history.jsonl.tmp"
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, self.ckpt / "history.jsonl")
        self.log(
            f"[agl] dropped {len(lines) - len(kept)} history.jsonl lines of steps after the checkpoint (step "
            f"{step}): they are trained again"
        )

    def _due(self, freq: int, steps_done: int) -> bool:
        """VERL's cadence for ``save_freq`` and ``test_freq``: ``freq > 0`` and a multiple of it, or the last step."""
        return freq > 0 and steps_done > 0 and (steps_done % freq == 0 or steps_done >= self.config.total_steps)

    def saves_after(self, steps_done: int) -> bool:
        """Whether the loop checkpoints once ``steps_done`` steps are trained (VERL's ``trainer.save_freq``)."""
        return self._due(self.config.save_freq, steps_done)

    def _history_steps(self) -> set[int]:
        if self.ckpt is None or not (self.ckpt / "history.jsonl").exists():
            return set()
        lines = (self.ckpt / "history.jsonl").read_text().splitlines()
        return {int(json.loads(line)["step"]) for line in lines if line.strip()}

    def _append_history(self, record: dict[str, Any]) -> None:
        if self.ckpt is None:
            return
        with (self.ckpt / "history.jsonl").open("a") as f:
            f.write(json.dumps(record) + "\n")

    def _save(self, last_trained: dict[str, Any] | None = None) -> None:
        if self.ckpt is None:
            return
        self.ckpt.mkdir(parents=True, exist_ok=True)
        name = f"step-{self.step:06d}"
        tmp = self.ckpt / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        self.backend.save(tmp)
        state = {
            "step": self.step,
            "version": self.version,
            "source": self.source.state(),
            "inflight": self.ledger.state() if self.config.max_staleness > 0 else None,
            "time": time.time(),
            "last_trained": last_trained,
        }
        (tmp / "state.json").write_text(json.dumps(state))
        final = self.ckpt / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        latest = self.ckpt / "latest"
        tmp_latest = self.ckpt / "latest.tmp"
        tmp_latest.write_text(name)
        os.replace(tmp_latest, latest)
        kept = sorted(p for p in self.ckpt.glob("step-*") if p.is_dir())
        for old in kept[: -self.config.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    def _pending(self) -> dict[str, Any] | None:
        if self.ckpt is None or not (self.ckpt / "pending.json").exists():
            return None
        pending = json.loads((self.ckpt / "pending.json").read_text())
        return pending if pending.get("step") == self.step else None

    # -- store side --------------------------------------------------------------------------------------------

    async def publish(self) -> int:
        """Publishes the backend's endpoints as the next version of ``resources_id``; returns the version."""
        update = await self.client.update_resources(
            self.config.resources_id, self.backend.resources(), create_if_missing=True
        )
        self.version = update.version
        if self.config.max_staleness > 0:
            # Saved with the ledger at the next enqueue or step (a validation alone writes nothing).
            self.ledger.published(self.version, self.step, keep=self.config.max_staleness)
        return self.version

    def tasks_for(self, step: int) -> list[Any]:
        k = self.config.tasks_per_step
        return [self.dataset[(step * k + i) % len(self.dataset)] for i in range(k)]

    def _rollout_config(self) -> dict[str, Any]:
        return {
            "max_attempts": self.config.max_attempts,
            "timeout_seconds": self.config.attempt_timeout,
            "retry_condition": ["ATTEMPT_STATUS_FAILED", "ATTEMPT_STATUS_TIMEOUT", "ATTEMPT_STATUS_UNRESPONSIVE"],
        }

    async def _enqueue(self, step: int) -> list[str]:
        pending = self._pending()
        if pending is not None:
            self.log(f"[agl] step {step}: reusing its {len(pending['rollout_ids'])} rollouts enqueued before a restart")
            return list(pending["rollout_ids"])
        groups = await self.client.enqueue_groups(
            self.tasks_for(step),
            self.config.n,
            mode="train",
            resources_id=self.config.resources_id,
            config=self._rollout_config(),
            metadata={"step": step},
        )
        ids = [r.rollout_id for group in groups for r in group]
        if self.ckpt is not None:
            self.ckpt.mkdir(parents=True, exist_ok=True)
            _write_json_atomic(self.ckpt / "pending.json", {"step": step, "rollout_ids": ids})
        return ids

    async def _wait(self, ids: list[str], timeout: float | None = None) -> list[str]:
        timeout = self.config.rollout_timeout if timeout is None else timeout
        finished = await self.client.wait_for_rollouts(ids, timeout)
        done = {r.rollout_id for r in finished}
        late = [r for r in ids if r not in done]
        self.empty.saw(finished, late, timeout)
        if late:
            cancelled = await self._cancel_rollouts(late)
            self.log(f"[agl] {len(late)} rollouts did not finish within {timeout:.0f} s: {cancelled} cancelled")
        return [r for r in ids if r in done]

    async def _cancel_rollouts(self, ids: Sequence[str], timeout: float = 10.0) -> int | None:
        """Marks ``ids`` cancelled, concurrently and for at most ``timeout`` seconds; returns how many it cancelled
        (those finished meanwhile refuse, quietly), or None when it could not finish (the error is logged)."""
        limit = asyncio.Semaphore(32)

        async def cancel(rollout_id: str) -> bool:
            async with limit:
                try:
                    await self.client.update_rollout(rollout_id, status="cancelled")
                    return True
                except Exception:  # noqa: BLE001 - finished meanwhile, or the store is going away too
                    return False

        try:
            return sum(await asyncio.wait_for(asyncio.gather(*(cancel(r) for r in ids)), timeout))
        except Exception as error:  # noqa: BLE001 - best effort (TimeoutError included)
            self.log(f"[agl] could not cancel {len(ids)} rollouts ({error!r})")
            return None

    # -- validation --------------------------------------------------------------------------------------------

    def validates_after(self, steps_done: int) -> bool:
        """Whether validation runs once ``steps_done`` steps are trained (VERL's ``trainer.test_freq``)."""
        return bool(self.val_dataset) and self._due(self.config.test_freq, steps_done)

    async def validate(self) -> ValidationResult:
        """Runs the validation set against the current policy: ``val_n`` rollouts of mode ``val`` per task (one
        group each) on the published version, waits for them, reads their final rewards; nothing is trained. The
        result is kept in ``val_history`` (and ``validation.jsonl`` next to the checkpoints)."""
        cfg = self.config
        if not self.val_dataset:
            raise ValueError("no validation dataset")
        started = time.perf_counter()
        resources_id, resources_version = cfg.resources_id, self.version
        if cfg.val_sampling:
            resources_id = f"{cfg.resources_id}-val"
            update = await self.client.update_resources(
                resources_id, val_resources(self.backend.resources(), cfg.val_sampling), create_if_missing=True
            )
            resources_version = update.version
        groups = await self.client.enqueue_groups(
            self.val_dataset,
            cfg.val_n,
            mode="val",
            resources_id=resources_id,
            config=self._rollout_config(),
            metadata={"step": self.step, "policy_version": self.version},
        )
        group_ids = [[r.rollout_id for r in group] for group in groups]
        ids = [r for group in group_ids for r in group]
        timeout = cfg.val_timeout if cfg.val_timeout is not None else cfg.rollout_timeout
        try:
            finished = await self._wait(ids, timeout)
        except asyncio.CancelledError:
            # The trainer is stopping (Ctrl-C, a cancelled task): a resumed trainer validates afresh and never reads
            # these, so the runners should not spend their time on them. (Training rollouts stay: pending.json
            # hands them to the resumed step.)
            cancelled = await self._cancel_rollouts(ids)
            if cancelled is not None:
                self.log(f"[agl] stopping: cancelled {cancelled} validation rollouts not finished yet")
            raise
        samples = await collect_rollouts(self.client, finished, cfg.collect_timeout, options=cfg.triplet_options)
        metrics = val_metrics(self.val_dataset, group_ids, samples, reward_fillna=cfg.reward_fillna)
        metrics["val/policy_version"] = float(self.version)
        wall = time.perf_counter() - started
        metrics["timing_s/validation"] = wall
        result = ValidationResult(
            step=self.step,
            version=self.version,
            reward_mean=metrics["val/reward_mean"],
            n=len(ids),
            resources_id=resources_id,
            resources_version=resources_version,
            rollout_ids=ids,
            wall_s=wall,
            metrics=metrics,
        )
        self.val_history.append(result)
        if self.ckpt is not None:
            self.ckpt.mkdir(parents=True, exist_ok=True)
            with (self.ckpt / "validation.jsonl").open("a") as f:
                f.write(json.dumps(asdict(result)) + "\n")
        self.log(self.format_validation(result))
        return result

    def format_validation(self, r: ValidationResult) -> str:
        m = r.metrics
        best = next((f"  best@{k[len('val/reward_best@') :]} {v:.3f}" for k, v in m.items() if "best@" in k), "")
        when = "before training" if r.step == 0 else f"after step {r.step}/{self.config.total_steps}"
        return (
            f"[agl] validation {when} (policy v{r.version}): reward {r.reward_mean:.3f}{best}  "
            f"rollouts {r.n} ({int(m['val/n_succeeded'])} succeeded, {int(m['val/n_rollouts_w_reward'])} with a "
            f"reward)  time {r.wall_s:.2f}s"
        )

    def _emit(self, metrics: dict[str, float], step: int) -> None:
        if self.metrics_sink is not None and metrics:
            self.metrics_sink(metrics, step)

    # -- one step ----------------------------------------------------------------------------------------------

    async def run_step(self) -> StepResult | None:
        """Runs step ``self.step``; returns its result (``None`` when no trainable row came back)."""
        if self.config.max_staleness > 0:
            return await self._run_async_step()
        step = self.step
        timings: dict[str, float] = {}
        t = time.perf_counter()
        if self._generation_done_at is not None:
            timings["generation_idle"] = time.time() - self._generation_done_at
        ids = await self._enqueue(step)
        timings["enqueue"] = time.perf_counter() - t
        t = time.perf_counter()
        finished = await self._wait(ids)
        timings["wait"] = time.perf_counter() - t
        self._generation_done_at = time.time()
        t = time.perf_counter()
        samples = await self.source.collect(finished, self.config.collect_timeout)
        timings["collect"] = time.perf_counter() - t
        return await self._finish_step(step, samples, timings)

    async def _finish_step(
        self,
        step: int,
        samples: list[RolloutTriplets],
        timings: dict[str, float],
        extra: dict[str, Any] | None = None,
    ) -> StepResult | None:
        """Trains ``samples`` as step ``step``, publishes the new weights, checkpoints and records the step.
        ``extra``: asynchronous mode's ``metrics`` and ``record`` (what else the history line says) of the step."""
        cfg, extra = self.config, extra or {}
        t = time.perf_counter()
        await self.backend.before_update()
        timings["before_update"] = time.perf_counter() - t
        try:
            result = await self._train(step, samples, timings)
        except BaseException:
            # The step's own error is what the caller sees: failing to undo before_update too is only logged.
            try:
                await self.backend.after_update()
            except Exception as error:  # noqa: BLE001 - reported, not raised over the step's error
                self.log(f"[agl] {error}")
            raise
        await self.backend.after_update()
        self.step += 1
        t = time.perf_counter()
        await self.publish()
        timings["publish"] = time.perf_counter() - t
        if result is not None:
            result.version = self.version
            result.metrics.update(extra.get("metrics", {}))
        trained_ids = [s.rollout_id for s in samples]
        record = {**asdict(result), "rollout_ids": trained_ids} if result else {"step": step, "rollout_ids": []}
        record.update(extra.get("record", {}))
        if self.saves_after(self.step):
            t = time.perf_counter()
            self._save(record)
            timings["checkpoint"] = time.perf_counter() - t
        self._append_history(record)
        self._save_ledger()
        if result is not None:
            self.history.append(result)
            if cfg.log_every and (step % cfg.log_every == 0 or self.step == cfg.total_steps):
                self.log(self.format_progress(result))
        return result

    # -- asynchronous steps (max_staleness > 0) -------------------------------------------------------------------

    async def _run_async_step(self) -> StepResult | None:
        """Step ``self.step`` without a pause in generation: the ledger is topped up to ``1 + max_staleness`` steps'
        groups (so the runners have the next steps' work while this one trains), then the oldest groups are waited
        for, judged and trained; newer ones carry over."""
        step = self.step
        timings: dict[str, float] = {}
        t = time.perf_counter()
        timings["generation_idle"] = await self._top_up()
        timings["enqueue"] = time.perf_counter() - t
        samples, extra = await self._gather(timings)
        carried = self.ledger.rollout_ids()
        finished = await self.client.wait_for_rollouts(carried, 0) if carried else []
        extra["metrics"]["async/groups_carried"] = float(len(self.ledger.groups))
        extra["metrics"]["async/rollouts_carried_finished"] = float(len(finished))
        return await self._finish_step(step, samples, timings, extra)

    def _lookahead(self) -> int:
        """How many groups the ledger keeps enqueued: this step's and the next ``max_staleness`` steps'."""
        cfg = self.config
        return cfg.tasks_per_step * max(1, min(1 + cfg.max_staleness, cfg.total_steps - self.step))

    async def _top_up(self, taken: int = 0, need: int = 0) -> float:
        """Enqueues batches of tasks while one more fits within ``_lookahead`` groups, or fewer than ``need`` groups
        are left besides the ``taken`` ones (groups dropped during a step are replaced); returns how long the runners
        had been out of work before (0 when they were not, or nothing was enqueued)."""
        cfg, idle, first = self.config, 0.0, True
        while (
            len(self.ledger.groups) + cfg.tasks_per_step <= self._lookahead() or len(self.ledger.groups) - taken < need
        ):
            if first:
                idle, first = await self._generation_idle(), False
            batch = self.ledger.next_batch
            groups = await self.client.enqueue_groups(
                self.tasks_for(batch),
                cfg.n,
                mode="train",
                resources_id=cfg.resources_id,
                config=self._rollout_config(),
                metadata={"step": self.step, "batch": batch},
            )
            now = time.time()
            self.ledger.add(InflightGroup(g[0].group_id, [r.rollout_id for r in g], self.version, now) for g in groups)
            self._save_ledger()
        return idle

    async def _generation_idle(self) -> float:
        """Seconds since the last of the ledger's rollouts finished, when all have (the runners are out of work)."""
        ids = self.ledger.rollout_ids()
        if not ids:
            return 0.0
        finished = await self.client.wait_for_rollouts(ids, 0)
        if len(finished) < len(ids):
            return 0.0
        last = max((r.end_time for r in finished if r.HasField("end_time")), default=time.time())
        return max(0.0, time.time() - last)

    async def _gather(self, timings: dict[str, float]) -> tuple[list[RolloutTriplets], dict[str, Any]]:
        """Waits until ``tasks_per_step`` complete groups (every rollout finished, whatever its status) within the
        staleness bound are in hand, oldest first; the others carry over. A group with a call older than the bound,
        or with no rollout that finished, leaves the ledger and is replaced by a new one."""
        cfg = self.config
        chosen: list[tuple[InflightGroup, list[RolloutTriplets]]] = []
        trained: list[int] = []
        dropped: list[str] = []
        dropped_calls = dropped_groups = empty_groups = 0
        timings["wait"] = timings["collect"] = 0.0
        while len(chosen) < cfg.tasks_per_step:
            await self._top_up(len(chosen), cfg.tasks_per_step - len(chosen))
            taken = {g.group_id for g, _ in chosen}
            open_groups = [g for g in self.ledger.groups if g.group_id not in taken]
            t = time.perf_counter()
            waiting = await self._complete_groups(open_groups, cfg.tasks_per_step - len(chosen))
            timings["wait"] += time.perf_counter() - t
            t = time.perf_counter()
            by_id = await collect_rollouts(
                self.client,
                [r for g in waiting for r in g.rollout_ids],
                cfg.collect_timeout,
                mode="train",
                options=cfg.triplet_options,
            )
            timings["collect"] += time.perf_counter() - t
            for group in waiting:
                got = [by_id[r] for r in group.rollout_ids if r in by_id]
                ages = self.ledger.staleness(call_versions(got, cfg.resources_id, group.enqueued_version), self.step)
                stale = [a for a in ages if a is None or a > cfg.max_staleness]
                if got and not stale:
                    chosen.append((group, got))
                    trained.extend(a for a in ages if a is not None)
                    continue
                self.ledger.remove([group.group_id])
                dropped.extend(group.rollout_ids)
                if stale:
                    dropped_groups, dropped_calls = dropped_groups + 1, dropped_calls + len(stale)
                else:
                    empty_groups += 1
        self.ledger.remove(g.group_id for g, _ in chosen)
        if dropped_groups:
            self.log(f"[agl] step {self.step}: dropped {dropped_groups} groups with calls older than the bound")
        metrics = staleness_metrics(trained, dropped_calls, dropped_groups)
        metrics["async/groups_empty"] = float(empty_groups)
        samples = [s for _, got in chosen for s in got]
        return samples, {"metrics": metrics, "record": {"dropped_rollout_ids": dropped}}

    async def _complete_groups(self, groups: list[InflightGroup], need: int) -> list[InflightGroup]:
        """The ``need`` oldest of ``groups`` whose rollouts have all finished, once there are that many. Rollouts
        still running ``rollout_timeout`` seconds after their group was enqueued are cancelled (their group is then
        complete, and trains what finished, as a synchronous step does)."""
        ids = [r for g in groups for r in g.rollout_ids]
        while True:
            finished = {r.rollout_id for r in await self.client.wait_for_rollouts(ids, 0)}
            complete = [g for g in groups if finished.issuperset(g.rollout_ids)]
            if len(complete) >= need:
                return complete[:need]
            late = [
                g for g in groups if g not in complete and time.time() > g.enqueued_at + self.config.rollout_timeout
            ]
            if late:
                unfinished = [r for g in late for r in g.rollout_ids if r not in finished]
                cancelled = await self._cancel_rollouts(unfinished)
                self.log(
                    f"[agl] {len(unfinished)} rollouts did not finish within {self.config.rollout_timeout:.0f} s: "
                    f"{cancelled} cancelled"
                )
                for group in late:  # cancelled once: not again
                    group.enqueued_at = float("inf")
                continue
            # The oldest groups that would make up the number usually finish first: wait on them, and look at all
            # again every poll interval (a younger group may finish before them).
            oldest = [g for g in groups if g not in complete][: need - len(complete)]
            await self.client.wait_for_rollouts([r for g in oldest for r in g.rollout_ids], _COMPLETE_POLL_S)

    def _save_ledger(self) -> None:
        if self.ckpt is not None and self.config.max_staleness > 0:
            self.ckpt.mkdir(parents=True, exist_ok=True)
            self.ledger.save(self.ckpt / "inflight.json")

    async def _train(self, step: int, samples: list[RolloutTriplets], timings: dict[str, float]) -> StepResult | None:
        cfg = self.config
        # Only train-mode rollouts are training data (validation and test rollouts are scored, never trained on).
        train = [s for s in samples if mode_name(s.mode) in ("train", "")]
        if len(train) < len(samples):
            self.log(f"[agl] step {step}: left out {len(samples) - len(train)} rollouts that are not of mode train")
            samples = train
        t = time.perf_counter()
        options = ConvertOptions(
            pad_token_id=self.backend.pad_token_id,
            max_prompt_length=cfg.max_prompt_length,
            max_response_length=cfg.max_response_length,
            reward_fillna=cfg.reward_fillna,
        )
        try:
            data, stats = to_dataproto(samples, options, meta_info={"global_steps": step})
        except ValueError as error:
            self.log(f"[agl] step {step}: skipped ({error})")
            return None
        data, adv_metrics = compute_rollout_level_advantage(
            data, cfg.adv_estimator, norm_adv_by_std_in_grpo=cfg.norm_adv_by_std_in_grpo
        )
        data, dropped = drop_marked_rows(data)
        timings["convert"] = time.perf_counter() - t
        t = time.perf_counter()
        metrics = await self.backend.update(data) if len(data) else {}
        timings["update"] = time.perf_counter() - t
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

    def format_progress(self, r: StepResult) -> str:
        gen_s = r.timings.get("wait", 0.0) + r.timings.get("enqueue", 0.0)
        tok_s = r.response_tokens / gen_s if gen_s > 0 else 0.0
        bridge = sum(r.timings.get(k, 0.0) for k in ("enqueue", "collect", "convert", "publish"))
        line = (
            f"[agl] step {r.step + 1}/{self.config.total_steps}  reward {r.reward_mean:.3f}  "
            f"rollouts {r.n_rollouts}  rows {r.n_rows}  tokens/s {tok_s:.0f}  "
            f"served by v{','.join(map(str, r.versions_seen)) or '?'} -> published v{r.version}  "
            f"time wait {r.timings.get('wait', 0):.2f}s update {r.timings.get('update', 0):.2f}s bridge {bridge:.2f}s"
        )
        if self.config.max_staleness == 0:
            return line
        m = r.metrics
        histogram = ",".join(
            f"{k.rsplit('/', 1)[1]}:{int(v)}" for k, v in m.items() if k.startswith("async/staleness/")
        )
        weight = m.get("rollout_corr/rollout_is_mean")
        correction = f"  IS weight mean {weight:.3f}" if weight is not None else ""
        dropped = int(m.get("async/groups_dropped_stale", 0))
        return (
            f"{line}\n      async: staleness {histogram or '-'}  dropped {dropped}  "
            f"carried {int(m.get('async/groups_carried', 0))}  idle trainer {r.timings.get('wait', 0):.2f}s "
            f"generation {r.timings.get('generation_idle', 0):.2f}s{correction}"
        )

    def summary(self) -> dict[str, Any]:
        """The run so far as the trainers' summary JSON (``--summary``, ``agl.summary``): reward, step, published
        version, timings and metrics per step, the validations and, once a step ran, the initial and final reward
        (mean of the last 5 steps), which it also logs with the reward plot."""
        rewards = [r.reward_mean for r in self.history]
        summary: dict[str, Any] = {
            "rewards": rewards,
            "steps": [r.step for r in self.history],
            "versions_published": [r.version for r in self.history],
            "timings": [r.timings for r in self.history],
            "metrics": [r.metrics for r in self.history],
            "validation": [
                {"step": v.step, "version": v.version, "reward_mean": v.reward_mean, "n": v.n, "metrics": v.metrics}
                for v in self.val_history
            ],
        }
        if rewards:
            tail = rewards[-5:]
            summary["initial_reward"], summary["final_reward"] = rewards[0], sum(tail) / len(tail)
            self.log("\nreward per step\n" + reward_plot(rewards))
            self.log(
                f"\n[agl] initial reward {rewards[0]:.3f} (step {self.history[0].step + 1})  ->  final reward "
                f"{summary['final_reward']:.3f} (mean of the last {len(tail)} steps)"
            )
        return summary

    async def run(self) -> list[StepResult]:
        """Resumes if a checkpoint exists, publishes the current policy, validates before training (when asked),
        and trains until ``total_steps``, validating every ``test_freq`` steps."""
        cfg = self.config
        self.resume()
        await self.backend.start()
        version = await self.publish()
        self.log(f"[agl] published {cfg.resources_id} v{version}; training from step {self.step}")
        if self.val_dataset and (cfg.val_before_train or cfg.val_only):
            self._emit((await self.validate()).metrics, self.step)
            if cfg.val_only:
                return self.history
        while self.step < cfg.total_steps:
            started = time.perf_counter()
            result = await self.run_step()
            if result is not None:
                result.timings["step"] = time.perf_counter() - started
            metrics = result.log_metrics() if result is not None else {"training/skipped_step": 1.0}
            note = self.empty.step_ended(self.step - 1, result is not None and result.n_rows > 0)
            if note:
                self.log(note)
            if self.validates_after(self.step):
                metrics.update((await self.validate()).metrics)
            self._emit(metrics, self.step)
            await asyncio.sleep(0)
        if self.ckpt is not None and (self.ckpt / "pending.json").exists():
            (self.ckpt / "pending.json").unlink()
        await self._cancel_lookahead()
        return self.history

    async def _cancel_lookahead(self) -> None:
        """Asynchronous mode, training over: the runners need not finish the groups enqueued ahead. Finished ones stay
        in the ledger (a run resumed with more steps trains them)."""
        ids = self.ledger.rollout_ids()
        if not ids:
            return
        cancelled = await self._cancel_rollouts(ids)
        finished = {r.rollout_id for r in await self.client.wait_for_rollouts(ids, 0)}
        self.ledger.groups = [g for g in self.ledger.groups if finished.issuperset(g.rollout_ids)]
        self._save_ledger()
        self.log(f"[agl] training over: cancelled {cancelled} rollouts enqueued ahead and not finished")
