"""The VERL trainer: VERL's V1 PPO trainer driving rollouts through the agl store (``python -m agl_bridge.verl``).

VERL keeps its workers (FSDP actor/ref, rollout replicas, weight sync); the step — enqueue ``rollout.n`` rollouts per
task as a group, wait, read triplets, build ``DataProto``, rollout-level advantages — is the same loop the local
trainer runs (``agl_bridge.training.loop``), with ``VerlBackend`` in place of the local policy.

The names below are imported on first use: ``agl_bridge.verl.cpu`` is VERL's plugin, imported while ``verl`` itself
initializes, and must register agl's CPU platform before any VERL module asks for its device.
"""

from typing import Any

__all__ = ["VerlBackend", "compose_config"]


def __getattr__(name: str) -> Any:
    if name == "VerlBackend":
        from agl_bridge.verl.backend import VerlBackend

        return VerlBackend
    if name == "compose_config":
        from agl_bridge.verl.compose import compose_config

        return compose_config
    raise AttributeError(f"module 'agl_bridge.verl' has no attribute {name!r}")
