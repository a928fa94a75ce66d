"""What the training loop exchanges with the rest: the backend that owns the weights (``PolicyBackend``), a step's
result (``StepResult``) and where metrics go (``MetricsSink``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from verl import DataProto

from agl_bridge.gen.agl.v1 import types_pb2

__all__ = ["MetricsSink", "PolicyBackend", "StepResult"]

# Receives each step's metrics (training, and validation when it ran) with the step they belong to: VERL's
# ``Tracking.log(data, step)`` has this shape.
MetricsSink = Callable[[dict[str, float], int], None]


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
