"""``agl.v1`` triplet messages for tests that need no store (in a real run the store's TypeScript adapter builds
them from spans; the interop tests exercise that path)."""

from __future__ import annotations

from collections.abc import Sequence

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.store.convert import enum_value
from agl_bridge.store.triplets import RolloutTriplets, Triplet


def triplet(
    prompt: Sequence[int],
    response: Sequence[int],
    *,
    mask: Sequence[int] | None = None,
    logprobs: Sequence[float] = (),
    turn_index: int = 0,
) -> Triplet:
    """A triplet whose response tokens were all sampled unless ``mask`` says otherwise."""
    return Triplet(
        prompt_token_ids=prompt,
        response_token_ids=response,
        response_mask=[1] * len(response) if mask is None else mask,
        logprobs=logprobs,
        turn_index=turn_index,
    )


def rollout(
    rollout_id: str,
    group_id: str,
    triplets: Sequence[Triplet] = (),
    *,
    final_reward: float | None = None,
    status: str = "succeeded",
    mode: str = "",
) -> RolloutTriplets:
    """A finished rollout's ``RolloutTriplets``; ``final_reward`` None: it reported none."""
    message = RolloutTriplets(
        rollout_id=rollout_id,
        group_id=group_id,
        triplets=triplets,
        status=enum_value(types_pb2.RolloutStatus, "ROLLOUT_STATUS_", status),
        mode=enum_value(types_pb2.RolloutMode, "ROLLOUT_MODE_", mode or "unspecified"),
    )
    if final_reward is not None:
        message.final_reward = final_reward
    return message
