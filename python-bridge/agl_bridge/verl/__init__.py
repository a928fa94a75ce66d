"""The VERL trainer: VERL's ``RayPPOTrainer`` driving rollouts through the agl store (``python -m agl_bridge.verl``).

VERL keeps its workers (FSDP actor/ref, rollout replicas, weight sync); the step — enqueue ``rollout.n`` rollouts per
task as a group, wait, read triplets, build ``DataProto``, rollout-level advantages — is the same loop the local
trainer runs (``agl_bridge.training.loop``), with ``VerlBackend`` in place of the local policy.
"""

from agl_bridge.verl.backend import VerlBackend
from agl_bridge.verl.compose import compose_config

__all__ = ["VerlBackend", "compose_config"]
