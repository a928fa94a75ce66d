"""A Python consumer of ``agl.v1.TripletService`` through the generated stubs (``agl_bridge.gen``), against the real
TypeScript server: it reads triplets with the exact token ids, disconnects mid-stream, resumes from its cursor with
nothing lost or repeated, and follows rollouts as they finish."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from agl_bridge import StoreClient, make_span
from agl_bridge.gen.agl.v1 import triplets_pb2, triplets_pb2_grpc

STEP_TIMEOUT_S = 10.0


async def _claim_with_calls(store: StoreClient, n: int) -> list[dict]:
    """Enqueues and claims ``n`` rollouts; each gets two proxy-shaped LLM spans and a reward span (not finished)."""
    await store.enqueue_rollouts([{"task": i} for i in range(n)], group_id="py-group")
    claimed = await store.dequeue(limit=n, worker_id="py-consumer")
    out = []
    for k, rollout in enumerate(claimed):
        rid, aid = rollout.rollout_id, rollout.latest_attempt.attempt_id
        prompts = [[100 + k, 200 + c, 300] for c in range(2)]
        responses = [[k, c, 7, 8] for c in range(2)]
        spans = [
            make_span(
                rid,
                aid,
                "chat fake-model",
                {
                    "agl.llm.source": "proxy",
                    "gen_ai.operation.name": "chat",
                    "gen_ai.response.id": f"{rid}-{c}",
                    "agl.llm.prompt_token_ids": prompts[c],
                    "agl.llm.response_token_ids": responses[c],
                    "agl.llm.logprobs": [-0.25] * 4,
                },
            )
            for c in range(2)
        ]
        spans.append(
            make_span(
                rid,
                aid,
                "agentlightning.annotation",
                {"agentlightning.reward.0.value": float(k), "agentlightning.reward.0.name": "primary"},
            )
        )
        await store.add_spans(spans)
        out.append(
            {"rollout_id": rid, "attempt_id": aid, "prompts": prompts, "responses": responses, "reward": float(k)}
        )
    return out


async def _read(
    stub: triplets_pb2_grpc.TripletServiceStub,
    request: triplets_pb2.StreamTripletsRequest,
    stop_after: int | None = None,
):
    """Reads messages until the stream ends or ``stop_after`` rollouts arrived (then cancels: a disconnect)."""
    got: list[triplets_pb2.StreamTripletsResponse] = []
    call = stub.StreamTriplets(request, timeout=STEP_TIMEOUT_S)
    try:
        async for message in call:
            got.append(message)
            if stop_after is not None and sum(m.HasField("rollout") for m in got) == stop_after:
                break
    finally:
        call.cancel()
    return got


def _ids(messages: list[triplets_pb2.StreamTripletsResponse]) -> list[str]:
    return [m.rollout.rollout_id for m in messages if m.HasField("rollout")]


async def test_python_reads_resumes_and_follows_the_triplet_stream(store_address: str) -> None:
    async with StoreClient(store_address, timeout=STEP_TIMEOUT_S) as store:
        rollouts = await _claim_with_calls(store, 6)
        for r in rollouts[:4]:
            await store.update_attempt(r["rollout_id"], r["attempt_id"], "succeeded")

        async with grpc.aio.insecure_channel(store_address.removeprefix("http://")) as channel:
            stub = triplets_pb2_grpc.TripletServiceStub(channel)
            request = triplets_pb2.StreamTripletsRequest(group_id="py-group")

            first = await _read(stub, request, stop_after=2)  # the consumer goes away after two rollouts
            request.cursor = first[-1].cursor
            rest = await _read(stub, request)
            assert rest[-1].caught_up and not rest[-1].HasField("rollout")
            seen = _ids(first) + _ids(rest)
            assert seen == [r["rollout_id"] for r in rollouts[:4]]  # creation order, nothing repeated or lost

            by_id = {m.rollout.rollout_id: m.rollout for m in first + rest if m.HasField("rollout")}
            for r in rollouts[:4]:
                message = by_id[r["rollout_id"]]
                assert message.final_reward == r["reward"]
                assert [list(t.prompt_token_ids) for t in message.triplets] == r["prompts"]
                assert [list(t.response_token_ids) for t in message.triplets] == r["responses"]
                assert all(list(t.response_mask) == [1, 1, 1, 1] for t in message.triplets)
                assert all(list(t.logprobs) == [-0.25] * 4 for t in message.triplets)
                assert {t.group_id for t in message.triplets} == {"py-group"}

            # Follow from the caught-up cursor: the last two arrive as they finish.
            request.cursor = rest[-1].cursor
            request.follow = True
            following = asyncio.ensure_future(_read(stub, request, stop_after=2))
            await asyncio.sleep(0.2)
            for r in rollouts[4:]:
                await store.update_attempt(r["rollout_id"], r["attempt_id"], "succeeded")
            assert _ids(await following) == [r["rollout_id"] for r in rollouts[4:]]


async def test_python_sees_clear_errors(store_address: str) -> None:
    async with grpc.aio.insecure_channel(store_address.removeprefix("http://")) as channel:
        stub = triplets_pb2_grpc.TripletServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as bad_cursor:
            await _read(stub, triplets_pb2.StreamTripletsRequest(cursor="not-a-cursor"))
        assert bad_cursor.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.GetRolloutTriplets(
                triplets_pb2.GetRolloutTripletsRequest(rollout_id="ro-000000000000"), timeout=STEP_TIMEOUT_S
            )
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
