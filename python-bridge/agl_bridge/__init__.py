"""agl_bridge: the Python side of agl — an asyncio gRPC client of the store, value conversions, and RL training.

Generated messages and stubs live in ``agl_bridge.gen.agl.v1`` (``types_pb2``, ``store_pb2``, ``resources_pb2``,
``triplets_pb2``). Training (the ``[train]`` extra: verl, torch, transformers) lives in submodules imported on demand:
``triplets`` (the ``agl.v1`` triplet messages) and ``triplet_source`` (reading them from the store), ``dataproto``
(triplets → VERL ``DataProto``), ``advantage`` (rollout-level advantages), ``loop`` (the training loop both trainers
share), ``local`` (the CPU trainer and its policy server: ``python -m agl_bridge.local``) and ``verl``
(``python -m agl_bridge.verl``).
"""

from agl_bridge.client import StoreClient, new_group_id, parse_address
from agl_bridge.convert import (
    from_attribute_value,
    from_struct,
    from_value,
    json_resource,
    llm_resource,
    make_span,
    new_span_id,
    new_trace_id,
    prompt_template_resource,
    to_attribute_value,
    to_struct,
    to_value,
)

__all__ = [
    "StoreClient",
    "from_attribute_value",
    "from_struct",
    "from_value",
    "json_resource",
    "llm_resource",
    "make_span",
    "new_group_id",
    "new_span_id",
    "new_trace_id",
    "parse_address",
    "prompt_template_resource",
    "to_attribute_value",
    "to_struct",
    "to_value",
]
