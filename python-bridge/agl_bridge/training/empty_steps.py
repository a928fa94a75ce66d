"""A run that trains nothing must fail, loudly: steps whose rollouts all failed (an agent that cannot reach its
model, a chat call to a base model, a bug) are counted, their rollouts' errors kept, and after ``limit`` such steps in
a row the run stops with the first of those errors."""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import json_format

from agl_bridge.errors import AglError
from agl_bridge.gen.agl.v1 import types_pb2

__all__ = ["EmptyStepGuard", "TrainingAborted", "rollout_error"]


class TrainingAborted(AglError):
    """Training cannot go on (nothing to train, a call the engine can never answer); the message says why."""


def rollout_error(rollout: types_pb2.Rollout) -> str | None:
    """Why ``rollout`` did not succeed (its status and its latest attempt's recorded error), or None if it did."""
    if rollout.status == types_pb2.ROLLOUT_STATUS_SUCCEEDED:
        return None
    status = types_pb2.RolloutStatus.Name(rollout.status).removeprefix("ROLLOUT_STATUS_").lower()
    meta = json_format.MessageToDict(rollout.latest_attempt.metadata) if rollout.HasField("latest_attempt") else {}
    error = meta.get("error") if isinstance(meta.get("error"), dict) else {}
    detail = f"{error.get('type', 'Error')}: {error.get('message', '')}".strip() if error else "no error recorded"
    return f"{rollout.rollout_id} {status}: {detail}"


class EmptyStepGuard:
    """Counts steps in a row that had nothing to train. ``limit`` 0 never stops."""

    def __init__(self, limit: int = 3, keep: int = 5) -> None:
        self.limit, self.keep = limit, keep
        self.empty_steps = 0
        self.errors: list[str] = []
        self._step_errors: list[str] = []

    def saw(self, rollouts: Iterable[types_pb2.Rollout], late: Iterable[str] = (), timeout: float = 0.0) -> None:
        """Records the errors of a step's rollouts (``late``: ids that did not finish within ``timeout`` s)."""
        found = [e for e in map(rollout_error, rollouts) if e is not None]
        found += [f"{r} did not finish within {timeout:.0f} s" for r in late]
        self._step_errors.extend(found)

    def step_ended(self, step: int, trained: bool) -> str | None:
        """Ends step ``step``; returns a line to log when it trained nothing. Raises ``TrainingAborted`` after
        ``limit`` such steps in a row."""
        errors, self._step_errors = self._step_errors, []
        if trained:
            self.empty_steps, self.errors = 0, []
            return None
        self.empty_steps += 1
        self.errors.extend(errors[: self.keep - len(self.errors)])
        if self.limit > 0 and self.empty_steps >= self.limit:
            first = "\n  ".join(self.errors) or "no rollout reported an error (none came back with a triplet)"
            raise TrainingAborted(
                f"{self.empty_steps} steps in a row had nothing to train (every rollout failed or gave no LLM call); "
                f"first errors:\n  {first}"
            )
        shown = f": {errors[0]}" if errors else ""
        return f"step {step + 1}: nothing to train ({len(errors)} rollouts did not succeed{shown})"
