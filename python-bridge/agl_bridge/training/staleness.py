"""Bounded staleness for asynchronous training: the groups a trainer has enqueued and not yet trained, and how stale
the calls of a finished group are.

Every LLM call a triplet comes from carries the version of the resources snapshot that served it (the LLM proxy
stamps it per call, so a rollout that spans a weight swap has calls of two versions). Staleness counts weight
updates, not versions (a trainer that restarts republishes the same weights under a new version): a call served by
weights that had ``j`` updates is ``k - j`` stale when the trainer is about to make update ``k + 1``. A group whose
every call is within ``max_staleness`` is trained; one with an older call is dropped whole (GRPO's baseline is the
group's mean reward, so a group is trained complete or not at all). A call whose version is unknown (0: a client that
does not stamp it) is taken as served by the version published when its group was enqueued — the oldest weights that
can have served it, so the bound holds whatever served it. A version the ledger cannot place (weights lost with a
kill, before the checkpoint's) counts as too stale.

``GroupLedger`` is the part of the trainer's state that makes this survive a kill: the groups enqueued and not yet
trained or dropped (FIFO), the next batch of tasks to enqueue and the updates behind each published version, written
to ``inflight.json`` after every enqueue and every step, and into each checkpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agl_bridge.store.triplets import RolloutTriplets

__all__ = ["GroupLedger", "InflightGroup", "call_versions", "staleness_metrics"]


@dataclass
class InflightGroup:
    """One task's ``n`` rollouts, enqueued at ``enqueued_at`` (wall clock) while ``enqueued_version`` was the
    published version."""

    group_id: str
    rollout_ids: list[str]
    enqueued_version: int
    enqueued_at: float


def call_versions(samples: Iterable[RolloutTriplets], resources_id: str, fallback: int) -> list[int]:
    """The version that served each triplet (each call, in transition mode) of ``samples``; ``fallback`` where the
    triplet does not say, or names another snapshot than the policy's ``resources_id``."""
    return [
        t.resources_version if t.resources_version > 0 and t.resources_id in ("", resources_id) else fallback
        for s in samples
        for t in s.triplets
    ]


def staleness_metrics(trained: Sequence[int], dropped_calls: int, dropped_groups: int) -> dict[str, float]:
    """A step's staleness metrics: ``async/staleness/k`` calls trained ``k`` updates stale (the histogram), their
    mean and max, and the calls and groups dropped as too stale."""
    out = {f"async/staleness/{k}": float(n) for k, n in sorted(Counter(trained).items())}
    out["async/staleness_mean"] = sum(trained) / len(trained) if trained else 0.0
    out["async/staleness_max"] = float(max(trained, default=0))
    out["async/calls_dropped_stale"] = float(dropped_calls)
    out["async/groups_dropped_stale"] = float(dropped_groups)
    return out


@dataclass
class GroupLedger:
    """Enqueued groups not yet trained or dropped, oldest first, and ``next_batch``: the index of the next batch of
    tasks to enqueue (``TrainingLoop.tasks_for``)."""

    groups: list[InflightGroup] = field(default_factory=list)
    next_batch: int = 0
    # Published version -> the number of updates its weights had had.
    updates_by_version: dict[int, int] = field(default_factory=dict)

    def published(self, version: int, updates: int, keep: int) -> None:
        """Notes that ``version`` serves the weights after ``updates`` updates; forgets versions more than ``keep``
        updates older (too stale to train on anyway)."""
        self.updates_by_version[version] = updates
        self.updates_by_version = {v: u for v, u in self.updates_by_version.items() if u >= updates - keep}

    def staleness(self, versions: Iterable[int], updates: int) -> list[int | None]:
        """How many updates behind ``updates`` the weights of each version are; None for a version it cannot place."""
        placed = self.updates_by_version
        return [updates - placed[v] if v in placed else None for v in versions]

    def add(self, groups: Iterable[InflightGroup]) -> None:
        self.groups.extend(groups)
        self.next_batch += 1

    def remove(self, group_ids: Iterable[str]) -> None:
        gone = set(group_ids)
        self.groups = [g for g in self.groups if g.group_id not in gone]

    def rollout_ids(self) -> list[str]:
        return [r for g in self.groups for r in g.rollout_ids]

    def state(self) -> dict[str, Any]:
        return {
            "next_batch": self.next_batch,
            "groups": [asdict(g) for g in self.groups],
            "updates_by_version": {str(v): u for v, u in self.updates_by_version.items()},
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> GroupLedger:
        return cls(
            groups=[
                InflightGroup(
                    str(g["group_id"]),
                    [str(r) for r in g["rollout_ids"]],
                    int(g["enqueued_version"]),
                    float(g["enqueued_at"]),
                )
                for g in state.get("groups", [])
            ],
            next_batch=int(state.get("next_batch", 0)),
            updates_by_version={int(v): int(u) for v, u in state.get("updates_by_version", {}).items()},
        )

    @classmethod
    def restore(cls, saved: Sequence[Mapping[str, Any]], done: set[str], updates: int) -> GroupLedger:
        """The ledger after a restart at ``updates`` updates, from what was saved (the checkpoint's, then
        ``inflight.json``, which is newer): their groups in order, once each, less those any of whose rollouts are in
        ``done`` (trained or dropped, as ``history.jsonl`` records, including steps lost with a kill: those are
        trained again on fresh rollouts); versions of weights past ``updates`` (lost) are forgotten."""
        ledger = cls()
        seen: set[str] = set()
        for state in saved:
            part = cls.from_state(state)
            ledger.next_batch = max(ledger.next_batch, part.next_batch)
            ledger.updates_by_version.update({v: u for v, u in part.updates_by_version.items() if u <= updates})
            for group in part.groups:
                if group.group_id in seen or done.intersection(group.rollout_ids):
                    continue
                seen.add(group.group_id)
                ledger.groups.append(group)
        return ledger
