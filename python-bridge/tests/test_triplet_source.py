"""The trainers' triplet source against the real TypeScript store server: the Python side reads the ``agl.v1``
triplets the TypeScript adapter built from the spans — every field of them, under the adapter's rules (a call
recorded twice counts once, by response id; LLM-judge calls inside a reward computation stay out; identical token
ids of two distinct calls are two samples) — and a store without ``TripletService`` gets a clear error."""

from __future__ import annotations

from typing import Any

import grpc.aio
import pytest

from agl_bridge import StoreClient, make_span
from agl_bridge.store.convert import json_resource, new_trace_id
from agl_bridge.store.triplet_source import StreamTripletSource, TripletServiceMissing
from agl_bridge.store.triplets import final_reward, mode_name, status_name
from agl_bridge.training.dataproto import ConvertOptions, to_dataproto
from agl_bridge.training.loop import LoopConfig, TrainingLoop
from agl_bridge.training.validation import collect_rollouts
from agl_bridge.verl import compose_config
from agl_bridge.verl.settings import loop_config

TIMEOUT_S = 10.0


def _call(
    rid: str, aid: str, trace: str, parent: str, response_id: str, prompt: list[int], response: list[int], **extra
):
    """An LLM-call span as the proxy records it (``source`` "openai-fetch" for the client hook's record)."""
    attributes: dict[str, Any] = {
        "agl.llm.source": extra.pop("source", "proxy"),
        "gen_ai.operation.name": "chat",
        "gen_ai.response.model": "policy-m",
        "gen_ai.response.id": response_id,
        "agl.llm.prompt_token_ids": prompt,
        "agl.llm.response_token_ids": response,
        **extra,
    }
    return make_span(rid, aid, "chat policy-m", attributes, trace_id=trace, parent_id=parent)


async def _finished_rollout(client: StoreClient) -> dict[str, Any]:
    """One finished train rollout whose spans hold: call 1 (recorded by the proxy and, with other ids, by the client
    hook), call 2 continuing call 1's context, call 3 with call 1's very token ids (another call), a judge call inside
    a reward computation, and a reward of 0.75."""
    snapshot = await client.add_resources({"cfg": json_resource({"k": 1})})
    (queued,) = await client.enqueue_rollouts(
        [{"q": 1}], mode="train", group_id="grp-1", resources_id=snapshot.resources_id
    )
    (rollout,) = await client.dequeue(limit=1, worker_id="py")
    rid, aid = rollout.rollout_id, rollout.latest_attempt.attempt_id
    assert rid == queued.rollout_id
    trace = new_trace_id()
    root = make_span(rid, aid, "agent.run", trace_id=trace)
    served = {"agl.llm.resources_id": "res-policy", "agl.llm.resources_version": 3}
    call1 = _call(
        rid, aid, trace, root.span_id, "resp-1", [1, 2], [3, 4], **served, **{"agl.llm.logprobs": [-0.5, -0.25]}
    )
    hook1 = _call(rid, aid, trace, root.span_id, "resp-1", [9], [9], source="openai-fetch")
    call2 = _call(
        rid, aid, trace, root.span_id, "resp-2", [1, 2, 3, 4, 7], [5], **served, **{"agl.llm.logprobs": [-1.0]}
    )
    call3 = _call(rid, aid, trace, root.span_id, "resp-3", [1, 2], [3, 4])
    judge = make_span(rid, aid, "agentlightning.reward", trace_id=trace, parent_id=root.span_id)
    judge_call = _call(rid, aid, trace, judge.span_id, "resp-j", [8], [8])
    reward = make_span(
        rid,
        aid,
        "agentlightning.annotation",
        {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75},
        trace_id=trace,
        parent_id=root.span_id,
    )
    await client.add_spans([root, call1, hook1, call2, call3, judge, judge_call, reward])
    await client.update_attempt(rid, aid, "succeeded")
    return {
        "rollout_id": rid,
        "attempt_id": aid,
        "resources_id": snapshot.resources_id,
        "spans": [call1.span_id, call2.span_id, call3.span_id],
    }


async def test_every_field_of_the_adapters_triplets_reaches_python(store_address: str) -> None:
    async with StoreClient(store_address, timeout=TIMEOUT_S) as client:
        r = await _finished_rollout(client)
        source = StreamTripletSource(client)
        (got,) = await source.collect([r["rollout_id"]], TIMEOUT_S)
        assert source.state()["cursor"]

    assert (got.rollout_id, got.attempt_id, got.group_id) == (r["rollout_id"], r["attempt_id"], "grp-1")
    assert (status_name(got.status), mode_name(got.mode), final_reward(got)) == ("succeeded", "train", 0.75)
    # The hook's record of call 1 collapsed into the proxy's (same response id); the judge call is not a sample.
    assert (got.stats.llm_calls, got.stats.duplicate_calls, got.stats.calls_without_token_ids) == (3, 1, 0)
    first, second, third = got.triplets
    assert [list(t.span_ids) for t in got.triplets] == [[s] for s in r["spans"]]
    assert [t.response_id for t in got.triplets] == ["resp-1", "resp-2", "resp-3"]
    assert [t.turn_index for t in got.triplets] == [0, 1, 2] and {t.turn_count for t in got.triplets} == {1}
    for t in got.triplets:
        assert (t.rollout_id, t.attempt_id, t.group_id, t.model) == (
            r["rollout_id"],
            r["attempt_id"],
            "grp-1",
            "policy-m",
        )
        assert final_reward(t) == 0.75
    assert (list(first.prompt_token_ids), list(first.response_token_ids)) == ([1, 2], [3, 4])
    assert (list(third.prompt_token_ids), list(third.response_token_ids)) == ([1, 2], [3, 4])
    assert list(first.response_mask) == [1, 1] and list(first.logprobs) == [-0.5, -0.25]
    assert (first.resources_id, first.resources_version) == ("res-policy", 3)
    # Call 3 names no snapshot: the rollout's is what served it.
    assert (third.resources_id, third.resources_version) == (r["resources_id"], 0)
    assert list(third.logprobs) == []
    # First occurrence: the reward goes to the latest call before it.
    assert [t.HasField("reward") for t in got.triplets] == [False, False, True] and third.reward == 0.75

    data, stats = to_dataproto([got], ConvertOptions(pad_token_id=0))
    assert stats.n_rows == 3 and list(data.non_tensor_batch["turn_index_list"]) == [0, 1, 2]
    assert "rollout_log_probs" not in data.batch.keys()  # call 3 came without logprobs


async def test_trajectory_options_merge_turns(store_address: str) -> None:
    async with StoreClient(store_address, timeout=TIMEOUT_S) as client:
        r = await _finished_rollout(client)
        source = StreamTripletSource(client, options={"mode": "TRIPLET_MODE_TRAJECTORY"})
        (got,) = await source.collect([r["rollout_id"]], TIMEOUT_S)

    merged, alone = got.triplets
    assert (merged.turn_index, merged.turn_count, list(merged.span_ids)) == (0, 2, r["spans"][:2])
    assert list(merged.prompt_token_ids) == [1, 2]
    assert list(merged.response_token_ids) == [3, 4, 7, 5] and list(merged.response_mask) == [1, 1, 0, 1]
    assert list(merged.logprobs) == [-0.5, -0.25, 0.0, -1.0] and merged.response_id == "resp-2"
    # Call 3 starts over from a shorter context.
    assert (alone.turn_index, alone.turn_count, list(alone.span_ids)) == (2, 1, r["spans"][2:])
    assert dict(got.stats.mismatches) == {"context_truncated": 1}

    data, _ = to_dataproto([got], ConvertOptions(pad_token_id=0))
    assert data.batch["response_mask"][0].tolist() == [1, 1, 0, 1]


async def test_a_store_without_the_triplet_service_gets_a_clear_error() -> None:
    # A gRPC server that serves nothing: what a store without TripletService answers (UNIMPLEMENTED).
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with StoreClient(f"http://127.0.0.1:{port}", timeout=TIMEOUT_S) as client:
            with pytest.raises(
                TripletServiceMissing, match=rf"127\.0\.0\.1:{port} does not serve agl\.v1\.TripletService"
            ):
                await StreamTripletSource(client).collect(["ro-1"], TIMEOUT_S)
            with pytest.raises(TripletServiceMissing, match="agl serve"):
                await collect_rollouts(client, ["ro-1"], TIMEOUT_S)
    finally:
        await server.stop(None)


async def test_trainer_configs_pass_triplet_options_to_the_store() -> None:
    assert loop_config(compose_config([])).triplet_options is None
    options = loop_config(compose_config(["agl.triplet_options={mode:TRIPLET_MODE_TRAJECTORY}"])).triplet_options
    assert options == {"mode": "TRIPLET_MODE_TRAJECTORY"}
    async with StoreClient("http://127.0.0.1:9") as client:
        loop = TrainingLoop(client, object(), [{}], LoopConfig(triplet_options=options))  # type: ignore[arg-type]  # no backend: only the source is read
        assert isinstance(loop.source, StreamTripletSource) and loop.source.options == options
