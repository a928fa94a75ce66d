"""agl_bridge: the Python side of the agl store — an asyncio gRPC client and value conversions.

Generated messages and stubs live in ``agl_bridge.gen.agl.v1`` (``types_pb2``, ``store_pb2``, ``resources_pb2``).
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
