"""OTLP ingest: Python's stock OpenTelemetry SDK and OTLP/HTTP exporter send spans to the real TypeScript store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from agl_bridge import StoreClient, from_attribute_value
from agl_bridge.gen.agl.v1 import types_pb2

STEP_TIMEOUT_S = 10.0


@pytest.fixture
async def client(store_address: str) -> AsyncIterator[StoreClient]:
    async with StoreClient(store_address, timeout=STEP_TIMEOUT_S) as store_client:
        yield store_client


async def claim(client: StoreClient) -> tuple[str, str]:
    await client.enqueue_rollouts([{"task": "otlp"}])
    (rollout,) = await client.dequeue(limit=1, worker_id="py-otlp")
    return rollout.rollout_id, rollout.latest_attempt.attempt_id


def provider_for(endpoint: str, resource_attributes: dict[str, str]) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "py-agent", **resource_attributes}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=10)))
    return provider


async def test_spans_from_the_stock_exporter_land_in_their_attempt(client: StoreClient, store_address: str) -> None:
    rollout_id, attempt_id = await claim(client)
    provider = provider_for(
        store_address, {"agentlightning.rollout_id": rollout_id, "agentlightning.attempt_id": attempt_id}
    )
    tracer = provider.get_tracer("test-otlp")
    with tracer.start_as_current_span("agent.step") as parent:
        parent.set_attribute("step.index", 3)
        parent.set_attribute("step.tags", ["a", "b"])
        with tracer.start_as_current_span("llm.call") as child:
            child.set_attribute("gen_ai.request.model", "tiny")
            child.set_attribute("prompt_token_ids", [1, 2, 3])
            child.add_event("token", {"n": 1})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    assert provider.force_flush(10_000)
    provider.shutdown()

    spans = (await client.query_spans(rollout_id, attempt_id)).spans
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"agent.step", "llm.call"}
    step, call = by_name["agent.step"], by_name["llm.call"]
    assert call.parent_id == step.span_id and step.parent_id == ""
    assert call.trace_id == step.trace_id and len(call.trace_id) == 32 and len(call.span_id) == 16
    assert from_attribute_value(step.attributes["step.index"]) == 3
    assert from_attribute_value(step.attributes["step.tags"]) == ["a", "b"]
    assert from_attribute_value(call.attributes["prompt_token_ids"]) == [1, 2, 3]
    assert call.status.code == types_pb2.STATUS_CODE_ERROR and call.status.description == "boom"
    assert [event.name for event in call.events] == ["token"]
    assert from_attribute_value(call.resource.attributes["service.name"]) == "py-agent"
    assert 0 < call.start_time <= call.end_time
    # Spans are heartbeats: the attempt is now running.
    attempt = await client.get_latest_attempt(rollout_id)
    assert attempt is not None and attempt.status == types_pb2.ATTEMPT_STATUS_RUNNING


async def test_span_attributes_override_the_resource_and_unplaced_spans_are_rejected(
    client: StoreClient, store_address: str
) -> None:
    first = await claim(client)
    second = await claim(client)
    provider = provider_for(
        store_address, {"agentlightning.rollout_id": first[0], "agentlightning.attempt_id": first[1]}
    )
    tracer = provider.get_tracer("test-otlp")
    tracer.start_span("for-first").end()
    moved = tracer.start_span(
        "for-second",
        attributes={"agentlightning.rollout_id": second[0], "agentlightning.attempt_id": second[1]},
    )
    moved.end()
    assert provider.force_flush(10_000)
    provider.shutdown()

    assert [s.name for s in (await client.query_spans(first[0], first[1])).spans] == ["for-first"]
    assert [s.name for s in (await client.query_spans(second[0], second[1])).spans] == ["for-second"]

    # A provider whose spans name no attempt: the store answers with a partial success, storing nothing.
    orphan = TracerProvider(resource=Resource.create({"service.name": "py-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"{store_address}/v1/traces", timeout=10)
    orphan.add_span_processor(SimpleSpanProcessor(exporter))
    orphan.get_tracer("t").start_span("nowhere").end()
    assert orphan.force_flush(10_000)
    orphan.shutdown()
    stats = await client.statistics()
    assert stats.total_spans == 2
