"""Training samples as the trainers see them: the triplets of one finished rollout.

Plain dataclasses, so the converter and the trainers do not depend on where triplets come from (the store's
``TripletService``, spans read from the store, or a test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agl_bridge.gen.agl.v1 import triplets_pb2, types_pb2

__all__ = ["RolloutSamples", "Triplet", "from_proto", "mode_name"]


@dataclass
class Triplet:
    """One training sample: the prompt the engine saw, what it sampled, and the reward matched to it.

    ``response_mask`` (1 = sampled by the model, 0 = inserted tokens such as tool output) and ``logprobs`` (one per
    response token) are ``None`` when not known."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int] | None = None
    logprobs: list[float] | None = None
    reward: float | None = None
    turn_index: int = 0
    resources_id: str = ""
    resources_version: int = 0


@dataclass
class RolloutSamples:
    """The triplets of one rollout and its final reward (``None`` when it reported none). ``mode`` is the rollout's
    mode (``train``, ``val``, ``test``; empty when unknown)."""

    rollout_id: str
    group_id: str
    triplets: list[Triplet] = field(default_factory=list)
    final_reward: float | None = None
    status: str = "succeeded"
    attempt_id: str = ""
    resources_id: str = ""
    mode: str = ""


def mode_name(mode: int) -> str:
    """``"train"``/``"val"``/``"test"`` for a ``RolloutMode``; ``""`` for unspecified."""
    name = types_pb2.RolloutMode.Name(mode).removeprefix("ROLLOUT_MODE_").lower()  # type: ignore[arg-type]
    return "" if name == "unspecified" else name


def _status_name(status: int) -> str:
    name = types_pb2.RolloutStatus.Name(status)  # type: ignore[arg-type]
    return name.removeprefix("ROLLOUT_STATUS_").lower()


def _optional(message: object, name: str) -> float | None:
    return getattr(message, name) if message.HasField(name) else None  # type: ignore[attr-defined]


def from_proto(rollout: triplets_pb2.RolloutTriplets) -> RolloutSamples:
    """Converts an ``agl.v1.RolloutTriplets`` (what ``StreamTriplets`` sends) to ``RolloutSamples``."""
    samples = RolloutSamples(
        rollout_id=rollout.rollout_id,
        group_id=rollout.group_id,
        final_reward=_optional(rollout, "final_reward"),
        status=_status_name(rollout.status),
        attempt_id=rollout.attempt_id,
        resources_id=rollout.resources_id,
        mode=mode_name(rollout.mode),
    )
    for t in rollout.triplets:
        mask: Sequence[int] = t.response_mask
        samples.triplets.append(
            Triplet(
                prompt_ids=list(t.prompt_token_ids),
                response_ids=list(t.response_token_ids),
                response_mask=list(mask) if len(mask) == len(t.response_token_ids) else None,
                logprobs=list(t.logprobs) if len(t.logprobs) == len(t.response_token_ids) else None,
                reward=_optional(t, "reward"),
                turn_index=t.turn_index,
                resources_id=t.resources_id,
                resources_version=t.resources_version,
            )
        )
        if not samples.group_id:
            samples.group_id = t.group_id
    return samples
