"""Conversions between plain Python values and the agl protobuf messages.

JSON values (task inputs, metadata, ``json`` resources) travel as ``google.protobuf.Value``/``Struct``; span
attributes travel as the OpenTelemetry-shaped ``agl.v1.AttributeValue`` oneof.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from google.protobuf import struct_pb2
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from agl_bridge.errors import ConfigError, DataError
from agl_bridge.gen.agl.v1 import types_pb2

_E = TypeVar("_E")

__all__ = [
    "from_attribute_value",
    "from_struct",
    "from_value",
    "json_resource",
    "llm_resource",
    "make_span",
    "new_span_id",
    "new_trace_id",
    "prompt_template_resource",
    "to_attribute_value",
    "to_struct",
    "to_value",
]

# A protobuf Value keeps numbers as doubles: integers beyond this are not exact.
_MAX_SAFE_INT = 2**53
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# ---------------------------------------------------------------------------------------------------------------
# JSON values


def to_value(obj: Any) -> struct_pb2.Value:
    """Converts a JSON-compatible Python value (None, bool, int, float, str, list/tuple, str-keyed mapping) to a
    ``google.protobuf.Value``. A ``Value`` is returned as is.

    Raises ``DataError`` (a ``ValueError``) for NaN/infinity and for integers beyond +-2**53 (a Value stores numbers as
    doubles; pass
    such numbers as strings), ``TypeError`` for anything else that is not JSON.
    """
    if isinstance(obj, struct_pb2.Value):
        return obj
    value = struct_pb2.Value()
    _fill_value(value, obj)
    return value


def to_struct(obj: Mapping[str, Any] | struct_pb2.Struct | None) -> struct_pb2.Struct:
    """Converts a str-keyed mapping of JSON values to a ``google.protobuf.Struct`` (None gives an empty one)."""
    if isinstance(obj, struct_pb2.Struct):
        return obj
    struct = struct_pb2.Struct()
    if obj is not None:
        _fill_struct(struct, obj)
    return struct


def from_value(value: struct_pb2.Value) -> Any:
    """Converts a ``google.protobuf.Value`` back to plain Python. Integral numbers within +-2**53 come back as
    ``int`` (JSON does not tell 1 from 1.0), other numbers as ``float``; an unset Value is ``None``."""
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "bool_value":
        return value.bool_value
    if kind == "number_value":
        number = value.number_value
        if number.is_integer() and abs(number) <= _MAX_SAFE_INT:
            return int(number)
        return number
    if kind == "string_value":
        return value.string_value
    if kind == "list_value":
        return [from_value(item) for item in value.list_value.values]
    return from_struct(value.struct_value)


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    """Converts a ``google.protobuf.Struct`` back to a plain dict (see ``from_value`` for numbers)."""
    return {key: from_value(item) for key, item in struct.fields.items()}


def _fill_value(value: struct_pb2.Value, obj: Any) -> None:
    if obj is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        value.bool_value = obj
    elif isinstance(obj, int):
        if abs(obj) > _MAX_SAFE_INT:
            raise DataError(f"integer {obj} is beyond +-2**53, which a protobuf Value cannot hold exactly")
        value.number_value = float(obj)
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise DataError(f"{obj} is not a JSON number")
        value.number_value = obj
    elif isinstance(obj, str):
        value.string_value = obj
    elif isinstance(obj, struct_pb2.Value):
        value.CopyFrom(obj)
    elif isinstance(obj, Mapping):
        _fill_struct(value.struct_value, obj)
    elif isinstance(obj, list | tuple):
        list_value = value.list_value
        list_value.SetInParent()
        for item in obj:
            _fill_value(list_value.values.add(), item)
    else:
        raise TypeError(f"{type(obj).__name__} is not a JSON value")


def _fill_struct(struct: struct_pb2.Struct, obj: Mapping[str, Any]) -> None:
    struct.SetInParent()
    for key, item in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be strings, got {type(key).__name__}")
        _fill_value(struct.fields[key], item)


# ---------------------------------------------------------------------------------------------------------------
# Span attributes


def to_attribute_value(obj: Any) -> types_pb2.AttributeValue:
    """Converts a Python attribute value to an ``agl.v1.AttributeValue``: str, bool, int (64-bit), float, or a
    homogeneous list/tuple of one of them (ints and floats mixed give a double array; an empty list gives an empty
    string array). An ``AttributeValue`` is returned as is. Raises ``TypeError``/``ValueError`` otherwise."""
    if isinstance(obj, types_pb2.AttributeValue):
        return obj
    if isinstance(obj, bool):
        return types_pb2.AttributeValue(bool_value=obj)
    if isinstance(obj, int):
        return types_pb2.AttributeValue(int_value=_check_int64(obj))
    if isinstance(obj, float):
        return types_pb2.AttributeValue(double_value=obj)
    if isinstance(obj, str):
        return types_pb2.AttributeValue(string_value=obj)
    if isinstance(obj, list | tuple):
        items: Sequence[Any] = obj
        if all(isinstance(item, str) for item in items):
            return types_pb2.AttributeValue(string_array=types_pb2.StringArray(values=items))
        if all(isinstance(item, bool) for item in items):
            return types_pb2.AttributeValue(bool_array=types_pb2.BoolArray(values=items))
        if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
            return types_pb2.AttributeValue(int_array=types_pb2.IntArray(values=[_check_int64(i) for i in items]))
        if all(isinstance(item, int | float) and not isinstance(item, bool) for item in items):
            return types_pb2.AttributeValue(double_array=types_pb2.DoubleArray(values=[float(i) for i in items]))
        kinds = sorted({type(item).__name__ for item in items})
        raise TypeError(f"attribute arrays must be homogeneous str, bool, int or float; got {', '.join(kinds)}")
    raise TypeError(f"{type(obj).__name__} is not a span attribute value (str, bool, int, float or a list of them)")


def from_attribute_value(value: types_pb2.AttributeValue) -> Any:
    """Converts an ``agl.v1.AttributeValue`` back to plain Python (arrays become lists; unset is ``None``)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    return list(getattr(value, kind).values)


def _check_int64(number: int) -> int:
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise DataError(f"integer attribute {number} does not fit in 64 bits")
    return number


def enum_value(enum: type[_E], prefix: str, value: int | str) -> _E:
    """An enum value from a number or a name, with or without its prefix, in any case ("succeeded"), typed as the
    enum (as the generated stubs type enum fields)."""
    wrapper = cast(EnumTypeWrapper, enum)
    if isinstance(value, str):
        name = value.upper()
        if not name.startswith(prefix):
            name = prefix + name
        if name not in wrapper.keys():
            raise ConfigError(f"unknown {wrapper.DESCRIPTOR.name} {value!r}: one of {_names(wrapper, prefix)}")
        return cast(_E, wrapper.Value(name))
    if value not in wrapper.values():
        raise ConfigError(f"unknown {wrapper.DESCRIPTOR.name} number {value}: one of {_names(wrapper, prefix)}")
    return cast(_E, value)


def _names(enum: EnumTypeWrapper, prefix: str) -> str:
    return ", ".join(name.removeprefix(prefix).lower() for name in enum.keys())


# ---------------------------------------------------------------------------------------------------------------
# Spans


def new_trace_id() -> str:
    """A random, non-zero OpenTelemetry trace id: 32 lowercase hex characters."""
    return _random_hex(16)


def new_span_id() -> str:
    """A random, non-zero OpenTelemetry span id: 16 lowercase hex characters."""
    return _random_hex(8)


def _random_hex(n_bytes: int) -> str:
    while True:
        candidate = secrets.token_hex(n_bytes)
        if candidate.strip("0"):
            return candidate


def make_span(
    rollout_id: str,
    attempt_id: str,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    trace_id: str | None = None,
    span_id: str | None = None,
    parent_id: str = "",
    start_time: float | None = None,
    end_time: float | None = None,
    status: int | str | None = None,
    status_description: str = "",
    sequence_id: int = 0,
) -> types_pb2.Span:
    """Builds an ``agl.v1.Span`` for ``AddSpans``.

    ``trace_id``/``span_id`` default to fresh random ids; ``attributes`` are converted with ``to_attribute_value``;
    ``start_time``/``end_time`` (epoch seconds) default to now; ``status`` is a ``StatusCode`` or ``"ok"``/``"error"``;
    ``sequence_id`` 0 lets the store allocate one. The span context (and the parent context when ``parent_id`` is
    given) repeat the ids, as OpenTelemetry exports them.
    """
    trace_id = trace_id or new_trace_id()
    span_id = span_id or new_span_id()
    now = time.time()
    start = now if start_time is None else start_time
    span = types_pb2.Span(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=sequence_id,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        start_time=start,
        end_time=max(start, now) if end_time is None else end_time,
        context=types_pb2.SpanContext(trace_id=trace_id, span_id=span_id),
    )
    if parent_id:
        span.parent.CopyFrom(types_pb2.SpanContext(trace_id=trace_id, span_id=parent_id))
    if status is not None or status_description:
        code = enum_value(types_pb2.StatusCode, "STATUS_CODE_", 0 if status is None else status)
        span.status.CopyFrom(types_pb2.SpanStatus(code=code, description=status_description))
    for key, item in (attributes or {}).items():
        span.attributes[key].CopyFrom(to_attribute_value(item))
    return span


# ---------------------------------------------------------------------------------------------------------------
# Resources


def llm_resource(
    endpoint: str,
    model: str,
    *,
    api_key: str = "",
    sampling_parameters: Mapping[str, Any] | None = None,
    proxy: bool = False,
) -> types_pb2.Resource:
    """An ``LLM`` resource (``proxy_llm`` when ``proxy``: an LLM-proxy endpoint runners bind to each attempt)."""
    llm = types_pb2.LLM(endpoint=endpoint, model=model, api_key=api_key)
    if sampling_parameters is not None:
        llm.sampling_parameters.CopyFrom(to_struct(sampling_parameters))
    return types_pb2.Resource(proxy_llm=llm) if proxy else types_pb2.Resource(llm=llm)


def prompt_template_resource(template: str, engine: int | str = "f_string") -> types_pb2.Resource:
    """A ``PromptTemplate`` resource; ``engine`` is a ``TemplateEngine`` or ``"f_string"``/``"jinja"``."""
    number = enum_value(types_pb2.TemplateEngine, "TEMPLATE_ENGINE_", engine)
    return types_pb2.Resource(prompt_template=types_pb2.PromptTemplate(template=template, engine=number))


def json_resource(obj: Any) -> types_pb2.Resource:
    """A ``json`` resource holding any JSON value."""
    return types_pb2.Resource(json=to_value(obj))
