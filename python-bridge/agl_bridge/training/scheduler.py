"""``AsyncScheduler``: what a step trains on when the loop is asynchronous (``max_staleness`` k > 0).

It keeps ``1 + k`` steps' groups enqueued (``staleness.GroupLedger``), so the runners generate while a step converts,
updates, publishes and checkpoints; a step trains the oldest ``tasks_per_step`` complete groups whose every call was
served by weights at most k updates old, drops older ones (and groups with no finished rollout), replacing them, and
carries the rest. The ledger goes to ``inflight.json`` after every enqueue and step, and into each checkpoint, so a
restarted trainer trains the finished groups and waits for the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verl.utils.profiler import simple_timer

from agl_bridge.log import get_logger
from agl_bridge.store.triplets import RolloutTriplets
from agl_bridge.training.config import LoopConfig
from agl_bridge.training.rollouts import Rollouts
from agl_bridge.training.run_dir import RunDirectory
from agl_bridge.training.staleness import GroupLedger, InflightGroup, call_versions, staleness_metrics
from agl_bridge.training.validation import collect_rollouts

__all__ = ["AsyncScheduler", "Gathered"]

log = get_logger("training")

# How often the scheduler looks for groups that finished out of order while it waits for older ones.
_COMPLETE_POLL_S = 0.5


@dataclass
class Gathered:
    """A step's training data in asynchronous mode: the rollouts of the groups chosen, the rollouts dropped (too
    stale, or in a group none of whose rollouts finished) and the step's ``async/*`` metrics."""

    samples: list[RolloutTriplets]
    dropped_rollout_ids: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


class AsyncScheduler:
    """Enqueues ahead and picks each step's groups; ``tasks_for(batch)`` gives the tasks of the ``batch``-th
    enqueue."""

    def __init__(
        self,
        rollouts: Rollouts,
        config: LoopConfig,
        run_dir: RunDirectory,
        tasks_for: Callable[[int], list[Any]],
    ) -> None:
        self.rollouts, self.config, self.run_dir, self.tasks_for = rollouts, config, run_dir, tasks_for
        self.ledger = GroupLedger()
        # The step being gathered and the version that serves it (``gather``'s arguments).
        self._step = self._version = 0

    def restore(self, checkpointed: Mapping[str, Any] | None, done: set[str] | None, step: int) -> None:
        """The groups in flight at the kill, from the checkpoint and ``inflight.json`` (newer), less those ``done``
        (None: a fresh start, which forgets them)."""
        if done is None or self.run_dir.path is None:
            self.ledger = GroupLedger()
            return
        saved = [checkpointed] if checkpointed else []
        inflight = self.run_dir.inflight()
        if inflight is not None:
            saved.append(inflight)
        self.ledger = GroupLedger.restore(saved, done, step)
        if self.ledger.groups:
            log.info("carried over %d groups enqueued before the restart, not trained", len(self.ledger.groups))

    def published(self, version: int, step: int) -> None:
        """``version`` serves the weights after ``step`` updates (saved with the ledger at the next enqueue or step;
        a validation alone writes nothing)."""
        self.ledger.published(version, step, keep=self.config.max_staleness)

    def save(self) -> None:
        self.run_dir.set_inflight(self.ledger.state())

    async def gather(self, step: int, version: int, timings: dict[str, float]) -> Gathered:
        """Step ``step``'s data, without a pause in generation: the ledger is topped up to ``1 + max_staleness``
        steps' groups (so the runners have the next steps' work while this one trains), then the oldest groups are
        waited for, judged and taken; newer ones carry over."""
        self._step, self._version = step, version
        with simple_timer("enqueue", timings):
            timings["generation_idle"] = await self._top_up()
        gathered = await self._choose(timings)
        finished = await self.rollouts.finished(self.ledger.rollout_ids())
        gathered.metrics["async/groups_carried"] = float(len(self.ledger.groups))
        gathered.metrics["async/rollouts_carried_finished"] = float(len(finished))
        return gathered

    def _lookahead(self) -> int:
        """How many groups the ledger keeps enqueued: this step's and the next ``max_staleness`` steps'."""
        cfg = self.config
        return cfg.tasks_per_step * max(1, min(1 + cfg.max_staleness, cfg.total_steps - self._step))

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
            groups = await self.rollouts.enqueue(
                self.tasks_for(batch),
                cfg.n,
                mode="train",
                resources_id=cfg.resources_id,
                metadata={"step": self._step, "batch": batch},
            )
            now = time.time()
            self.ledger.add(InflightGroup(g[0].group_id, [r.rollout_id for r in g], self._version, now) for g in groups)
            self.save()
        return idle

    async def _generation_idle(self) -> float:
        """Seconds since the last of the ledger's rollouts finished, when all have (the runners are out of work)."""
        ids = self.ledger.rollout_ids()
        if not ids:
            return 0.0
        finished = await self.rollouts.finished(ids)
        if len(finished) < len(ids):
            return 0.0
        last = max((r.end_time for r in finished if r.HasField("end_time")), default=time.time())
        return max(0.0, time.time() - last)

    async def _choose(self, timings: dict[str, float]) -> Gathered:
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
            with simple_timer("wait", timings):
                waiting = await self._complete_groups(open_groups, cfg.tasks_per_step - len(chosen))
            with simple_timer("collect", timings):
                by_id = await collect_rollouts(
                    self.rollouts.client,
                    [r for g in waiting for r in g.rollout_ids],
                    cfg.collect_timeout,
                    mode="train",
                    options=cfg.triplet_options,
                )
            for group in waiting:
                got = [by_id[r] for r in group.rollout_ids if r in by_id]
                versions = call_versions(got, cfg.resources_id, group.enqueued_version)
                ages = self.ledger.staleness(versions, self._step)
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
            log.info("step %d: dropped %d groups with calls older than the bound", self._step, dropped_groups)
        metrics = staleness_metrics(trained, dropped_calls, dropped_groups)
        metrics["async/groups_empty"] = float(empty_groups)
        return Gathered([s for _, got in chosen for s in got], dropped, metrics)

    async def _complete_groups(self, groups: list[InflightGroup], need: int) -> list[InflightGroup]:
        """The ``need`` oldest of ``groups`` whose rollouts have all finished, once there are that many. Rollouts
        still running ``rollout_timeout`` seconds after their group was enqueued are cancelled (their group is then
        complete, and trains what finished, as a synchronous step does)."""
        ids = [r for g in groups for r in g.rollout_ids]
        while True:
            finished = {r.rollout_id for r in await self.rollouts.finished(ids)}
            complete = [g for g in groups if finished.issuperset(g.rollout_ids)]
            if len(complete) >= need:
                return complete[:need]
            timeout = self.config.rollout_timeout
            late = [g for g in groups if g not in complete and time.time() > g.enqueued_at + timeout]
            if late:
                unfinished = [r for g in late for r in g.rollout_ids if r not in finished]
                cancelled = await self.rollouts.cancel(unfinished)
                log.info("%d rollouts did not finish within %.0f s: %s cancelled", len(unfinished), timeout, cancelled)
                for group in late:  # cancelled once: not again
                    group.enqueued_at = float("inf")
                continue
            # The oldest groups that would make up the number usually finish first: wait on them, and look at all
            # again every poll interval (a younger group may finish before them).
            oldest = [g for g in groups if g not in complete][: need - len(complete)]
            await self.rollouts.client.wait_for_rollouts([r for g in oldest for r in g.rollout_ids], _COMPLETE_POLL_S)

    async def cancel_lookahead(self) -> None:
        """Training over: the runners need not finish the groups enqueued ahead. Finished ones stay in the ledger (a
        run resumed with more steps trains them)."""
        ids = self.ledger.rollout_ids()
        if not ids:
            return
        cancelled = await self.rollouts.cancel(ids)
        finished = {r.rollout_id for r in await self.rollouts.finished(ids)}
        self.ledger.groups = [g for g in self.ledger.groups if finished.issuperset(g.rollout_ids)]
        self.save()
        log.info("training over: cancelled %s rollouts enqueued ahead and not finished", cancelled)
