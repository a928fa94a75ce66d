"""agl_bridge: the Python side of agl — an asyncio gRPC client of the store, value conversions, and RL training.

Generated messages and stubs live in ``agl_bridge.gen.agl.v1`` (``types_pb2``, ``store_pb2``, ``resources_pb2``,
``triplets_pb2``). The package has a folder per job:

- ``store``: talking to the store and the proxy — the client, value conversions, the triplet messages and their
  source, the proxy's admin routes;
- ``training`` (the ``[train]`` extra: verl, torch, transformers, imported on demand): the training loop both trainers
  share, triplets → VERL ``DataProto``, rollout-level advantages, staleness, validation;
- ``local``: the CPU trainer and its policy server (``python -m agl_bridge.local``);
- ``verl``: VERL's own trainer (``python -m agl_bridge.verl``).
"""

from agl_bridge.store.client import StoreClient, new_group_id, parse_address
from agl_bridge.store.convert import (
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
