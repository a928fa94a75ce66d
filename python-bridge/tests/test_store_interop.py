"""Interop: the Python client against the real TypeScript store server (no mocks). Each test gets a fresh server."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc
import grpc.aio
import pytest
from conftest import StoreServer

from agl_bridge import (
    StoreClient,
    from_attribute_value,
    from_struct,
    from_value,
    json_resource,
    llm_resource,
    make_span,
    prompt_template_resource,
)
from agl_bridge.errors import StoreError
from agl_bridge.gen.agl.v1 import types_pb2

STEP_TIMEOUT_S = 10.0


@pytest.fixture
async def client(store_address: str) -> AsyncIterator[StoreClient]:
    async with StoreClient(store_address, timeout=STEP_TIMEOUT_S) as store_client:
        yield store_client


async def test_rollout_lifecycle(client: StoreClient) -> None:
    task = {"question": "What is 2 + 2?", "answer": 4, "tags": ["math", "easy"], "difficulty": 0.25}
    (queued,) = await client.enqueue_rollouts([task], mode="train", metadata={"source": "python"})
    rollout_id = queued.rollout_id
    assert re.fullmatch(r"ro-[0-9a-f]{12}", rollout_id)
    assert queued.status == types_pb2.ROLLOUT_STATUS_QUEUING
    assert queued.mode == types_pb2.ROLLOUT_MODE_TRAIN
    assert from_value(queued.input) == task
    assert from_struct(queued.metadata) == {"source": "python"}
    assert not queued.HasField("latest_attempt")
    assert (await client.statistics()).queue_length == 1

    (claimed,) = await client.dequeue(limit=1, worker_id="py-worker-1")
    assert claimed.rollout_id == rollout_id
    assert claimed.status == types_pb2.ROLLOUT_STATUS_PREPARING
    attempt = claimed.latest_attempt
    assert re.fullmatch(r"at-[0-9a-f]{8}", attempt.attempt_id)
    assert (attempt.sequence_id, attempt.worker_id, attempt.status) == (
        1,
        "py-worker-1",
        types_pb2.ATTEMPT_STATUS_PREPARING,
    )
    assert await client.dequeue(limit=1, worker_id="py-worker-1") == []  # the queue is empty now

    # Long-poll from before the rollout finishes: the server answers once it succeeds.
    waiter = asyncio.create_task(client.wait_for_rollouts([rollout_id], timeout_seconds=STEP_TIMEOUT_S))
    await asyncio.sleep(0.2)
    assert not waiter.done()

    # A batch with a span repeated (the first copy wins), then the whole batch retried plus one new span.
    root = make_span(rollout_id, attempt.attempt_id, "agent.run", {"agent": "calc", "turn": 1})
    llm = make_span(
        rollout_id,
        attempt.attempt_id,
        "llm.call",
        {"model": "tiny", "temperature": 0.7, "stream": False, "token_ids": [1, 2, 3], "stops": ["\n"]},
        trace_id=root.trace_id,
        parent_id=root.span_id,
    )
    reward = make_span(rollout_id, attempt.attempt_id, "reward", {"reward": 1.0}, trace_id=root.trace_id)
    first = await client.add_spans([root, llm, root])
    assert [ack.span_id for ack in first] == [root.span_id, llm.span_id, root.span_id]
    assert [ack.duplicate for ack in first] == [False, False, True]
    assert first[2].sequence_id == first[0].sequence_id
    assert first[0].sequence_id < first[1].sequence_id
    assert (await client.get_rollout(rollout_id)).status == types_pb2.ROLLOUT_STATUS_RUNNING

    retried = await client.add_spans([root, llm, reward])
    assert [ack.duplicate for ack in retried] == [True, True, False]
    assert [ack.sequence_id for ack in retried[:2]] == [ack.sequence_id for ack in first[:2]]
    assert all(ack.attempt_status == types_pb2.ATTEMPT_STATUS_RUNNING for ack in retried)

    spans = (await client.query_spans(rollout_id, attempt.attempt_id)).spans
    assert [span.span_id for span in spans] == [root.span_id, llm.span_id, reward.span_id]
    assert [span.sequence_id for span in spans] == sorted({span.sequence_id for span in spans})
    stored_llm = spans[1]
    assert (stored_llm.trace_id, stored_llm.parent_id, stored_llm.name) == (root.trace_id, root.span_id, "llm.call")
    assert {key: from_attribute_value(value) for key, value in stored_llm.attributes.items()} == {
        "model": "tiny",
        "temperature": 0.7,
        "stream": False,
        "token_ids": [1, 2, 3],
        "stops": ["\n"],
    }
    assert stored_llm.attributes["token_ids"].WhichOneof("value") == "int_array"
    assert (await client.statistics()).total_spans == 3

    finished = await client.update_attempt(rollout_id, attempt.attempt_id, status="succeeded")
    assert finished.status == types_pb2.ATTEMPT_STATUS_SUCCEEDED
    assert finished.HasField("end_time")

    (done,) = await asyncio.wait_for(waiter, STEP_TIMEOUT_S)
    assert done.rollout_id == rollout_id
    assert done.status == types_pb2.ROLLOUT_STATUS_SUCCEEDED
    assert done.HasField("end_time")
    (again,) = await client.wait_for_rollouts([rollout_id], timeout_seconds=0)
    assert again.status == types_pb2.ROLLOUT_STATUS_SUCCEEDED
    succeeded = await client.query_rollouts(status_in=["succeeded"])
    assert [r.rollout_id for r in succeeded.rollouts] == [rollout_id] and succeeded.page.total == 1


async def test_wait_for_rollouts_times_out_with_unfinished(client: StoreClient) -> None:
    (queued,) = await client.enqueue_rollouts(["still queued"])
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await client.wait_for_rollouts([queued.rollout_id], timeout_seconds=0.5) == []
    assert 0.4 <= loop.time() - started < STEP_TIMEOUT_S


async def test_dequeue_long_poll_gets_work_enqueued_later(client: StoreClient) -> None:
    poller = asyncio.create_task(client.dequeue(limit=2, worker_id="w-late", wait_seconds=STEP_TIMEOUT_S))
    await asyncio.sleep(0.2)
    assert not poller.done()
    (queued,) = await client.enqueue_rollouts([{"n": 1}])
    claimed = await asyncio.wait_for(poller, STEP_TIMEOUT_S)
    assert [r.rollout_id for r in claimed] == [queued.rollout_id]
    assert claimed[0].latest_attempt.worker_id == "w-late"


async def test_group_rollouts_share_a_group_id(client: StoreClient) -> None:
    group = await client.enqueue_group({"prompt": "Write a haiku"}, 4, mode="train")
    other = await client.enqueue_group({"prompt": "Write a limerick"}, 2)
    assert len(group) == 4 and len(other) == 2
    group_id = group[0].group_id
    assert group_id and all(r.group_id == group_id for r in group)
    assert other[0].group_id and other[0].group_id != group_id
    assert len({r.rollout_id for r in group + other}) == 6
    assert all(from_value(r.input) == {"prompt": "Write a haiku"} for r in group)

    matched = await client.query_rollouts(group_id=group_id)
    assert matched.page.total == 4
    assert [r.rollout_id for r in matched.rollouts] == [r.rollout_id for r in group]
    page = await client.query_rollouts(group_id=group_id, limit=2, offset=1)
    assert [r.rollout_id for r in page.rollouts] == [r.rollout_id for r in group[1:3]] and page.page.total == 4

    named = await client.enqueue_group("task", 2, group_id="grp-mine")
    assert [r.group_id for r in named] == ["grp-mine", "grp-mine"]

    claimed = await client.dequeue(limit=10, worker_id="grpo")
    assert [r.rollout_id for r in claimed] == [r.rollout_id for r in group + other + named]  # FIFO


async def test_failed_attempt_is_retried_per_config(client: StoreClient) -> None:
    config = {"max_attempts": 2, "retry_condition": ["ATTEMPT_STATUS_FAILED"]}
    (queued,) = await client.enqueue_rollouts([{"flaky": True}], config=config)
    assert queued.config.max_attempts == 2
    assert list(queued.config.retry_condition) == [types_pb2.ATTEMPT_STATUS_FAILED]

    (first,) = await client.dequeue(worker_id="w1")
    await client.update_attempt(first.rollout_id, "latest", "failed")
    assert (await client.get_rollout(first.rollout_id)).status == types_pb2.ROLLOUT_STATUS_REQUEUING

    (second,) = await client.dequeue(worker_id="w2")
    assert second.rollout_id == first.rollout_id
    assert second.latest_attempt.sequence_id == 2
    assert second.latest_attempt.attempt_id != first.latest_attempt.attempt_id
    await client.update_attempt(second.rollout_id, second.latest_attempt.attempt_id, types_pb2.ATTEMPT_STATUS_FAILED)
    assert (await client.get_rollout(first.rollout_id)).status == types_pb2.ROLLOUT_STATUS_FAILED
    latest = await client.get_latest_attempt(first.rollout_id)
    assert latest is not None and latest.attempt_id == second.latest_attempt.attempt_id


async def test_cancelled_rollout_reaches_the_runner_through_span_acks(client: StoreClient) -> None:
    await client.enqueue_rollouts(["long task"])
    (claimed,) = await client.dequeue(worker_id="runner")
    attempt_id = claimed.latest_attempt.attempt_id
    cancelled = await client.update_rollout(claimed.rollout_id, status="cancelled")
    assert cancelled.status == types_pb2.ROLLOUT_STATUS_CANCELLED
    (ack,) = await client.add_spans([make_span(claimed.rollout_id, attempt_id, "late.step")])
    assert ack.attempt_status == types_pb2.ATTEMPT_STATUS_CANCELLED
    assert (await client.get_rollout(claimed.rollout_id)).status == types_pb2.ROLLOUT_STATUS_CANCELLED


async def test_resources_add_update_get_latest(client: StoreClient) -> None:
    assert await client.get_latest_resources() is None

    first = await client.add_resources(
        {
            "main_llm": llm_resource(
                "http://127.0.0.1:8000/v1", "qwen2.5-0.5b", sampling_parameters={"temperature": 1}
            ),
            "prompt": prompt_template_resource("Solve: {question}"),
            "extra": json_resource({"max_turns": 3, "tools": ["calc"]}),
        }
    )
    assert re.fullmatch(r"rs-[0-9a-f]{12}", first.resources_id)
    assert first.version == 1
    assert first.resources["main_llm"].llm.model == "qwen2.5-0.5b"
    assert from_struct(first.resources["main_llm"].llm.sampling_parameters) == {"temperature": 1}
    assert first.resources["prompt"].prompt_template.engine == types_pb2.TEMPLATE_ENGINE_F_STRING
    assert from_value(first.resources["extra"].json) == {"max_turns": 3, "tools": ["calc"]}

    latest = await client.get_latest_resources()
    assert latest is not None and latest == first

    (rollout,) = await client.enqueue_rollouts(["uses the latest resources"])
    assert rollout.resources_id == first.resources_id

    second = await client.update_resources(
        first.resources_id, {"main_llm": llm_resource("http://127.0.0.1:8001/v1", "qwen2.5-0.5b-step1")}
    )
    assert (second.resources_id, second.version) == (first.resources_id, 2)
    assert set(second.resources) == {"main_llm"}
    latest = await client.get_latest_resources()
    assert latest is not None and (latest.resources_id, latest.version) == (first.resources_id, 2)
    assert latest.resources["main_llm"].llm.endpoint == "http://127.0.0.1:8001/v1"
    assert (await client.get_resources(first.resources_id)).version == 2

    with pytest.raises(StoreError) as raised:
        await client.update_resources("rs-000000000000", {"x": json_resource(1)})
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    created = await client.update_resources("rs-000000000000", {"x": json_resource(1)}, create_if_missing=True)
    assert (created.resources_id, created.version) == ("rs-000000000000", 1)
    latest = await client.get_latest_resources()
    assert latest is not None and latest.resources_id == "rs-000000000000"
    assert (await client.statistics()).total_resources >= 2


async def test_watch_resources_receives_versions_published_after_subscribing(client: StoreClient) -> None:
    first = await client.add_resources({"prompt": prompt_template_resource("v1 {q}")})
    async with aclosing(client.watch_resources(include_latest=True)) as updates:
        # The latest snapshot comes first, which also shows the subscription is live.
        initial = await asyncio.wait_for(anext(updates), STEP_TIMEOUT_S)
        assert (initial.resources_id, initial.version) == (first.resources_id, 1)
        published = await client.update_resources(first.resources_id, {"prompt": prompt_template_resource("v2 {q}")})
        received = await asyncio.wait_for(anext(updates), STEP_TIMEOUT_S)
        assert received == published
        assert received.version == 2 and received.resources["prompt"].prompt_template.template == "v2 {q}"
        fresh = await client.add_resources({"other": json_resource(None)})
        assert await asyncio.wait_for(anext(updates), STEP_TIMEOUT_S) == fresh


async def test_watch_resources_without_latest_sends_only_new_versions(client: StoreClient) -> None:
    before = await client.add_resources({"v": json_resource(0)})
    async with aclosing(client.watch_resources()) as updates:
        next_update = asyncio.ensure_future(anext(updates))
        # Without include_latest nothing marks the subscription live: publish until one arrives.
        published = []
        for version in range(1, 50):
            published.append(await client.update_resources(before.resources_id, {"v": json_resource(version)}))
            done, _ = await asyncio.wait({next_update}, timeout=0.2)
            if done:
                break
        received = await asyncio.wait_for(next_update, STEP_TIMEOUT_S)
    assert received.version > 1
    assert received in published


async def test_unknown_rollout_is_not_found(client: StoreClient) -> None:
    missing = "ro-0123456789ab"
    with pytest.raises(StoreError) as raised:
        await client.get_rollout(missing)
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert missing in (raised.value.details or "")

    with pytest.raises(StoreError) as raised:
        await client.update_attempt(missing, "latest", "succeeded")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND

    with pytest.raises(StoreError) as raised:
        await client.add_spans([make_span(missing, "at-00000000", "orphan")])
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert (await client.statistics()).total_spans == 0


async def test_statistics(client: StoreClient) -> None:
    await client.enqueue_rollouts([1, 2, 3])
    stats = await client.statistics()
    assert stats.backend == "memory"
    assert (stats.total_rollouts, stats.queue_length) == (3, 3)
    assert stats.rollouts_by_status["ROLLOUT_STATUS_QUEUING"] == 3


async def test_token_is_required_when_the_server_has_one(token_store_server: StoreServer) -> None:
    address, token = token_store_server.address, token_store_server.token
    assert token
    for bad_token in (None, "wrong-" + token):
        async with StoreClient(address, bad_token, timeout=STEP_TIMEOUT_S) as anonymous:
            with pytest.raises(StoreError) as raised:
                await anonymous.enqueue_rollouts(["nope"])
            assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(StoreError) as raised:
                await anonymous.statistics()
            assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(StoreError) as raised:
                async with aclosing(anonymous.watch_resources(include_latest=True)) as updates:
                    await asyncio.wait_for(anext(updates), STEP_TIMEOUT_S)
            assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED

    async with StoreClient(address, token, timeout=STEP_TIMEOUT_S) as authorized:
        (queued,) = await authorized.enqueue_rollouts(["yes"])
        assert (await authorized.get_rollout(queued.rollout_id)).rollout_id == queued.rollout_id
        stats = await authorized.statistics()
        assert (stats.backend, stats.total_rollouts) == ("memory", 1)  # the rejected enqueues stored nothing
