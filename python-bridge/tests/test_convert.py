"""Unit tests of the value, attribute, span and resource helpers (no server)."""

from __future__ import annotations

import math
import re
import time
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from agl_bridge import (
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
from agl_bridge.gen.agl.v1 import types_pb2

JSON_SAMPLES = [
    None,
    True,
    False,
    0,
    -7,
    2**53,
    1.5,
    "",
    "héllo",
    [],
    {},
    [1, "two", None, [3.25], {"four": False}],
    {"question": "2+2?", "answer": 4, "meta": {"tags": ["math"], "difficulty": 0.5, "none": None}},
]


@pytest.mark.parametrize("sample", JSON_SAMPLES, ids=repr)
def test_json_values_round_trip(sample: Any) -> None:
    value = to_value(sample)
    assert isinstance(value, struct_pb2.Value)
    back = from_value(value)
    assert back == sample
    assert type(back) is type(sample)
    # Same encoding as protobuf's own JSON mapping.
    reference = json_format.ParseDict(sample, struct_pb2.Value())
    assert json_format.MessageToDict(value) == json_format.MessageToDict(reference)


def test_value_kinds() -> None:
    assert to_value(None).WhichOneof("kind") == "null_value"
    assert to_value(True).WhichOneof("kind") == "bool_value"  # bool is not taken for a number
    assert to_value(3).number_value == 3.0
    assert to_value((1, 2)).list_value.values[1].number_value == 2.0
    assert to_value({}).WhichOneof("kind") == "struct_value"
    assert to_value([]).WhichOneof("kind") == "list_value"


def test_numbers_come_back_as_int_when_integral() -> None:
    assert from_value(to_value(2.0)) == 2 and isinstance(from_value(to_value(2.0)), int)
    assert isinstance(from_value(to_value(2.5)), float)
    assert from_value(struct_pb2.Value()) is None  # an unset Value


def test_value_passthrough_and_nested_messages() -> None:
    value = to_value("x")
    assert to_value(value) is value
    assert from_value(to_value({"inner": value})) == {"inner": "x"}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 2**53 + 1])
def test_non_json_numbers_are_rejected(bad: float) -> None:
    with pytest.raises(ValueError):
        to_value(bad)


@pytest.mark.parametrize("bad", [object(), {1: "int key"}, {"set": {1, 2}}, b"bytes"])
def test_non_json_values_are_rejected(bad: object) -> None:
    with pytest.raises(TypeError):
        to_value(bad)


def test_structs() -> None:
    struct = to_struct({"a": 1, "b": [True]})
    assert isinstance(struct, struct_pb2.Struct)
    assert from_struct(struct) == {"a": 1, "b": [True]}
    assert from_struct(to_struct(None)) == {}
    assert to_struct(struct) is struct


@pytest.mark.parametrize(
    ("python", "field"),
    [
        ("text", "string_value"),
        (True, "bool_value"),
        (42, "int_value"),
        (-(2**63), "int_value"),
        (0.25, "double_value"),
        (["a", "b"], "string_array"),
        ([True, False], "bool_array"),
        ([1, 2, 3], "int_array"),
        ([0.5, 1.5], "double_array"),
        ((1, 2.5), "double_array"),
        ([], "string_array"),
    ],
    ids=repr,
)
def test_attribute_values(python: object, field: str) -> None:
    value = to_attribute_value(python)
    assert value.WhichOneof("value") == field
    back = from_attribute_value(value)
    assert back == (list(python) if isinstance(python, tuple) else python)


def test_attribute_bool_is_not_int() -> None:
    assert to_attribute_value(False).WhichOneof("value") == "bool_value"
    with pytest.raises(TypeError):
        to_attribute_value([1, True])


@pytest.mark.parametrize("bad", [None, {"a": 1}, ["a", 1], [1.0, "x"], [[1]], 2**63, [2**64]])
def test_bad_attribute_values(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        to_attribute_value(bad)


def test_random_ids() -> None:
    trace_ids = {new_trace_id() for _ in range(100)}
    span_ids = {new_span_id() for _ in range(100)}
    assert len(trace_ids) == 100 and len(span_ids) == 100
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in trace_ids)
    assert all(re.fullmatch(r"[0-9a-f]{16}", s) for s in span_ids)


def test_make_span() -> None:
    before = time.time()
    span = make_span(
        "ro-000000000001",
        "at-00000001",
        "llm.call",
        {"gen_ai.request.model": "m", "n": 2, "temperature": 0.7, "stream": False, "token_ids": [1, 2, 3]},
    )
    assert span.rollout_id == "ro-000000000001" and span.attempt_id == "at-00000001" and span.name == "llm.call"
    assert re.fullmatch(r"[0-9a-f]{32}", span.trace_id) and re.fullmatch(r"[0-9a-f]{16}", span.span_id)
    assert span.context.trace_id == span.trace_id and span.context.span_id == span.span_id
    assert span.parent_id == "" and not span.HasField("parent")
    assert span.sequence_id == 0
    assert before <= span.start_time <= span.end_time <= time.time()
    attrs = {key: from_attribute_value(value) for key, value in span.attributes.items()}
    assert attrs == {"gen_ai.request.model": "m", "n": 2, "temperature": 0.7, "stream": False, "token_ids": [1, 2, 3]}
    assert span.attributes["n"].WhichOneof("value") == "int_value"
    assert span.attributes["token_ids"].WhichOneof("value") == "int_array"
    assert not span.HasField("status")


def test_make_span_with_explicit_ids_parent_and_status() -> None:
    trace_id, parent, span_id = new_trace_id(), new_span_id(), new_span_id()
    span = make_span(
        "ro-1",
        "at-1",
        "child",
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent,
        start_time=10.0,
        end_time=12.5,
        status="error",
        status_description="boom",
        sequence_id=7,
    )
    assert (span.trace_id, span.span_id, span.parent_id) == (trace_id, span_id, parent)
    assert span.parent.trace_id == trace_id and span.parent.span_id == parent
    assert (span.start_time, span.end_time, span.sequence_id) == (10.0, 12.5, 7)
    assert span.status.code == types_pb2.STATUS_CODE_ERROR and span.status.description == "boom"
    assert make_span("r", "a", "n", status=types_pb2.STATUS_CODE_OK).status.code == types_pb2.STATUS_CODE_OK
    with pytest.raises(ValueError):
        make_span("r", "a", "n", status="fine")


def test_resources() -> None:
    llm = llm_resource("http://llm:8000/v1", "qwen", sampling_parameters={"temperature": 0.7})
    assert llm.WhichOneof("kind") == "llm" and llm.llm.model == "qwen"
    assert from_struct(llm.llm.sampling_parameters) == {"temperature": 0.7}
    assert llm_resource("http://proxy", "m", proxy=True).WhichOneof("kind") == "proxy_llm"
    prompt = prompt_template_resource("Solve {question}")
    assert prompt.prompt_template.engine == types_pb2.TEMPLATE_ENGINE_F_STRING
    assert prompt_template_resource("{{ q }}", "jinja").prompt_template.engine == types_pb2.TEMPLATE_ENGINE_JINJA
    assert from_value(json_resource({"k": [1]}).json) == {"k": [1]}
