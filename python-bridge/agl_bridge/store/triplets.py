"""Training samples as the trainers see them: the ``agl.v1`` messages of ``proto/agl/v1/triplets.proto``.

A triplet has one definition, ``agl.v1.Triplet``: the TypeScript adapter builds it from a rollout's spans, the
store's ``TripletService`` sends it, and the trainers read it as it came — every field (``turn_count``,
``span_ids``, ``response_id``, ``model``, the resources version, …) included. ``RolloutTriplets`` carries one
finished rollout: its triplets, final reward, status, mode and adapter statistics. This module only names the two
messages and reads what protobuf leaves implicit (the optional final reward, enum names).
"""

from __future__ import annotations

from agl_bridge.gen.agl.v1 import triplets_pb2, types_pb2

__all__ = ["RolloutTriplets", "Triplet", "final_reward", "mode_name", "status_name"]

Triplet = triplets_pb2.Triplet
RolloutTriplets = triplets_pb2.RolloutTriplets


def mode_name(mode: types_pb2.RolloutMode) -> str:
    """``"train"``/``"val"``/``"test"`` for a ``RolloutMode``; ``""`` for unspecified."""
    name = types_pb2.RolloutMode.Name(mode).removeprefix("ROLLOUT_MODE_").lower()
    return "" if name == "unspecified" else name


def status_name(status: types_pb2.RolloutStatus) -> str:
    """``"succeeded"``, ``"failed"``, … for a ``RolloutStatus``; ``""`` for unspecified."""
    name = types_pb2.RolloutStatus.Name(status).removeprefix("ROLLOUT_STATUS_").lower()
    return "" if name == "unspecified" else name


def final_reward(message: RolloutTriplets | Triplet) -> float | None:
    """The rollout's final reward (its last reward span); ``None`` when it reported none."""
    return message.final_reward if message.HasField("final_reward") else None
