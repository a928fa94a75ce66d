"""Client behaviour that needs no agl server: address parsing, metadata, deadlines and the retry policy.

The retry tests run the client against a small in-process Python gRPC server that fails on purpose.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from agl_bridge import StoreClient, make_span, new_group_id, parse_address
from agl_bridge.errors import StoreError
from agl_bridge.gen.agl.v1 import store_pb2, store_pb2_grpc, triplets_pb2, triplets_pb2_grpc, types_pb2
from agl_bridge.store.triplet_source import StreamTripletSource


@pytest.mark.parametrize(
    ("address", "target", "secure"),
    [
        ("http://127.0.0.1:4747", "127.0.0.1:4747", False),
        ("http://localhost:4747/", "localhost:4747", False),
        ("HTTP://Example.com:80", "example.com:80", False),
        ("https://store.example:8443", "store.example:8443", True),
        ("https://store.example", "store.example:443", True),
        ("http://store.example", "store.example:80", False),
        ("http://[::1]:4747", "[::1]:4747", False),
        ("127.0.0.1:4747", "127.0.0.1:4747", False),
        ("  localhost:1  ", "localhost:1", False),
        ("unix:/tmp/agl.sock", "unix:/tmp/agl.sock", False),
    ],
)
def test_parse_address(address: str, target: str, secure: bool) -> None:
    assert parse_address(address) == (target, secure)
    assert StoreClient(address).target == target


@pytest.mark.parametrize("bad", ["", "   ", "http://", "http://host:1/path", "http://host:1?x=1"])
def test_parse_address_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_address(bad)


def test_token_metadata() -> None:
    assert StoreClient("localhost:1", "s3cret").metadata == (("authorization", "Bearer s3cret"),)
    assert StoreClient("localhost:1").metadata == ()
    assert StoreClient("localhost:1", "").metadata == ()


def test_group_ids_are_fresh() -> None:
    ids = {new_group_id() for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("grp-") for i in ids)


class FlakyStore(store_pb2_grpc.LightningStoreServicer):
    """Fails the first `failures` calls of every RPC with UNAVAILABLE, recording calls and their metadata."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: dict[str, int] = {}
        self.authorization: list[str | bytes | None] = []
        self.waits: list[float] = []

    async def _count(self, name: str, context: grpc.aio.ServicerContext) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.authorization.append(dict(context.invocation_metadata() or ()).get("authorization"))
        if self.calls[name] <= self.failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "try again")

    async def GetRollout(self, request, context):  # noqa: N802 (gRPC method name)
        await self._count("GetRollout", context)
        return types_pb2.Rollout(rollout_id=request.rollout_id)

    async def AddSpans(self, request, context):  # noqa: N802
        await self._count("AddSpans", context)
        return store_pb2.AddSpansResponse(acks=[store_pb2.SpanAck(span_id=s.span_id) for s in request.spans])

    async def EnqueueRollouts(self, request, context):  # noqa: N802
        await self._count("EnqueueRollouts", context)
        return store_pb2.EnqueueRolloutsResponse()

    async def DequeueRollouts(self, request, context):  # noqa: N802
        await self._count("DequeueRollouts", context)
        return store_pb2.DequeueRolloutsResponse()

    async def UpdateAttempt(self, request, context):  # noqa: N802
        await self._count("UpdateAttempt", context)
        return types_pb2.Attempt()

    async def WaitForRollouts(self, request, context):  # noqa: N802
        self.waits.append(request.timeout_seconds)
        await self._count("WaitForRollouts", context)
        await asyncio.sleep(request.timeout_seconds)
        return store_pb2.WaitForRolloutsResponse()


async def _serve(servicer: FlakyStore) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    store_pb2_grpc.add_LightningStoreServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[FlakyStore, str]]:
    servicer = FlakyStore(failures=2)
    server, address = await _serve(servicer)
    try:
        yield servicer, address
    finally:
        await server.stop(None)


async def test_reads_and_add_spans_retry_unavailable(flaky: tuple[FlakyStore, str]) -> None:
    servicer, address = flaky
    async with StoreClient(address, "tok") as client:
        rollout = await client.get_rollout("ro-1")
        acks = await client.add_spans([make_span("ro-1", "at-1", "s")])
    assert rollout.rollout_id == "ro-1" and len(acks) == 1
    assert servicer.calls == {"GetRollout": 3, "AddSpans": 3}
    assert set(servicer.authorization) == {"Bearer tok"}


async def test_reads_give_up_after_three_tries() -> None:
    servicer = FlakyStore(failures=10)
    server, address = await _serve(servicer)
    try:
        async with StoreClient(address) as client:
            with pytest.raises(StoreError) as raised:
                await client.get_rollout("ro-1")
        assert raised.value.code == grpc.StatusCode.UNAVAILABLE
        assert servicer.calls == {"GetRollout": 3}
        assert servicer.authorization == [None, None, None]
    finally:
        await server.stop(None)


async def test_state_changing_calls_never_retry(flaky: tuple[FlakyStore, str]) -> None:
    servicer, address = flaky
    async with StoreClient(address) as client:
        for call in (
            client.enqueue_rollouts([{"q": 1}]),
            client.dequeue(worker_id="w"),
            client.update_attempt("ro-1", "latest", "succeeded"),
        ):
            with pytest.raises(StoreError) as raised:
                await call
            assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert servicer.calls == {"EnqueueRollouts": 1, "DequeueRollouts": 1, "UpdateAttempt": 1}


async def test_long_poll_deadline_exceeds_the_wait() -> None:
    servicer = FlakyStore(failures=0)
    server, address = await _serve(servicer)
    try:
        # The client's own timeout is far shorter than the wait: the long-poll deadline must not use it.
        async with StoreClient(address, timeout=0.2) as client:
            assert await client.wait_for_rollouts(["ro-1"], timeout_seconds=0.6) == []
            # Control: the same wait under the client's own timeout does run out.
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await client.store.WaitForRollouts(store_pb2.WaitForRolloutsRequest(timeout_seconds=0.6), timeout=0.2)
            assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    finally:
        await server.stop(None)


async def test_a_wait_broken_by_the_link_is_made_again_for_the_time_left(flaky: tuple[FlakyStore, str]) -> None:
    servicer, address = flaky
    async with StoreClient(address) as client:
        assert await client.wait_for_rollouts(["ro-1"], timeout_seconds=0.6) == []
    assert servicer.calls == {"WaitForRollouts": 3}
    assert servicer.waits[0] == pytest.approx(0.6, abs=0.01)
    assert servicer.waits[0] > servicer.waits[1] > servicer.waits[2] > 0, "each try waits only for the time left"


async def test_unreachable_server_is_unavailable() -> None:
    server, address = await _serve(FlakyStore(failures=0))
    await server.stop(None)  # nothing listens on that port any more
    async with StoreClient(address, timeout=5) as client:
        with pytest.raises(StoreError) as raised:
            await client.statistics()
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE


async def test_closed_client_refuses_calls() -> None:
    client = StoreClient("localhost:1")
    await client.close()
    await client.close()  # idempotent
    with pytest.raises(RuntimeError):
        await client.get_rollout("ro-1")


async def test_bad_arguments_are_rejected_before_any_call() -> None:
    async with StoreClient("localhost:1") as client:
        with pytest.raises(ValueError):
            await client.update_attempt("ro-1", "latest", "done")
        with pytest.raises(ValueError):
            await client.enqueue_rollouts([1], mode="training")
        with pytest.raises(ValueError):
            await client.enqueue_group(1, 0)
        with pytest.raises(TypeError):
            await client.enqueue_rollouts([object()])
        with pytest.raises(TypeError):
            await client.enqueue_rollouts("one task, not a list of them")


class BreakingTriplets(triplets_pb2_grpc.TripletServiceServicer):
    """Streams rollout ``ro-a`` (cursor ``c1``), then breaks the stream with UNAVAILABLE, as a dropped link does; the
    next stream, from cursor ``c1``, brings ``ro-b``. Records the cursor of every request."""

    def __init__(self) -> None:
        self.cursors: list[str] = []

    async def StreamTriplets(self, request, context):  # noqa: N802 (gRPC method name)
        self.cursors.append(request.cursor)
        if request.cursor == "":
            yield triplets_pb2.StreamTripletsResponse(
                rollout=triplets_pb2.RolloutTriplets(rollout_id="ro-a"), cursor="c1"
            )
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")
        yield triplets_pb2.StreamTripletsResponse(rollout=triplets_pb2.RolloutTriplets(rollout_id="ro-b"), cursor="c2")


async def _serve_triplets(servicer: triplets_pb2_grpc.TripletServiceServicer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    triplets_pb2_grpc.add_TripletServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"http://127.0.0.1:{port}"


async def test_triplet_stream_that_breaks_resumes_from_its_cursor() -> None:
    servicer = BreakingTriplets()
    server, address = await _serve_triplets(servicer)
    try:
        async with StoreClient(address) as client:
            source = StreamTripletSource(client)
            got = await source.collect(["ro-a", "ro-b"], timeout=10)
        assert [r.rollout_id for r in got] == ["ro-a", "ro-b"]
        assert servicer.cursors == ["", "c1"], "the second stream must start where the first broke off"
        assert source.resumed == 1 and source.cursor == "c2"
    finally:
        await server.stop(None)


class SlowTriplets(triplets_pb2_grpc.TripletServiceServicer):
    """Streams ``ro-a`` (cursor ``c1``) and ``ro-b`` (``c2``) from the request's cursor on, then nothing more (the
    other rollouts still run)."""

    def __init__(self) -> None:
        self.cursors: list[str] = []

    async def StreamTriplets(self, request, context):  # noqa: N802 (gRPC method name)
        self.cursors.append(request.cursor)
        after = {"": 0, "c1": 1, "c2": 2}[request.cursor]
        for rollout_id, cursor in (("ro-a", "c1"), ("ro-b", "c2"))[after:]:
            yield triplets_pb2.StreamTripletsResponse(
                rollout=triplets_pb2.RolloutTriplets(rollout_id=rollout_id), cursor=cursor
            )
        await asyncio.sleep(60)


async def test_what_a_cancelled_read_ahead_read_is_collected_next_and_never_read_again() -> None:
    servicer = SlowTriplets()
    server, address = await _serve_triplets(servicer)
    try:
        async with StoreClient(address) as client:
            source = StreamTripletSource(client)
            # The loop reads ahead for the whole step; ro-c is cancelled and never comes.
            reading = asyncio.ensure_future(source.collect(["ro-a", "ro-b", "ro-c"], timeout=30))
            while source.cursor != "c2":
                await asyncio.sleep(0.01)
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            got = await source.collect(["ro-b"], timeout=5)
            assert [r.rollout_id for r in got] == ["ro-b"]
            assert servicer.cursors == [""], "what was read ahead is not read again"
            assert source.skipped == 1, "ro-a, read ahead and not asked for, is passed over"
            assert await source.collect(["ro-a"], timeout=0.2) == [], "and not held any longer"
        assert servicer.cursors == ["", "c2"] and source.cursor == "c2"
    finally:
        await server.stop(None)
