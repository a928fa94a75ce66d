"""Where a trainer gets the triplets of finished rollouts. One small module, so the source can be switched:

- ``StreamTripletSource``: the store's ``TripletService.StreamTriplets`` (built from the token ids the LLM proxy or a
  tracer hook recorded), resumable by a cursor the trainer keeps in its checkpoint;
- ``SpanTripletSource``: the same built here from the spans of each rollout (for a store without ``TripletService``);
  transition mode only: one triplet per LLM-call span with token ids, the rollout's last reward span as final reward;
- ``AutoTripletSource``: the stream, falling back to spans when the store answers ``UNIMPLEMENTED``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
import grpc.aio

from agl_bridge.client import StoreClient
from agl_bridge.convert import from_attribute_value
from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.triplets import RolloutSamples, Triplet, from_proto, mode_name

__all__ = ["AutoTripletSource", "SpanTripletSource", "StreamTripletSource", "TripletSource", "make_source"]

PROMPT_IDS = "agl.llm.prompt_token_ids"
RESPONSE_IDS = "agl.llm.response_token_ids"
LOGPROBS = "agl.llm.logprobs"
RESOURCES_ID = "agl.llm.resources_id"
RESOURCES_VERSION = "agl.llm.resources_version"
LLM_SOURCE = "agl.llm.source"
REWARD_SPAN = "agentlightning.annotation"
REWARD_VALUE = "agentlightning.reward.0.value"


class TripletSource(Protocol):
    """Collects the triplets of finished rollouts."""

    name: str

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutSamples]:
        """The triplets of each listed (finished) rollout, in the order given; rollouts not delivered within
        ``timeout`` seconds are left out."""
        ...

    def state(self) -> dict[str, Any]:
        """What to keep in a checkpoint to resume."""
        ...

    def load_state(self, state: dict[str, Any]) -> None: ...


class StreamTripletSource:
    """Reads ``StreamTriplets`` (train mode, following) from the saved cursor until every wanted rollout arrived.
    Messages of other rollouts (late stragglers of earlier steps) are passed over and counted in ``skipped``; the
    cursor moves past everything read, so a restarted trainer never reads a rollout twice."""

    name = "stream"

    def __init__(self, client: StoreClient, mode: str | None = "train", options: dict[str, Any] | None = None):
        self.client = client
        self.mode = mode
        self.options = options
        self.cursor = ""
        self.skipped = 0

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutSamples]:
        wanted = set(rollout_ids)
        got: dict[str, RolloutSamples] = {}
        stream = self.client.stream_triplets(
            cursor=self.cursor, follow=True, mode=self.mode, options=self.options, timeout=timeout
        )
        try:
            async for message in stream:
                if message.HasField("rollout"):
                    rollout_id = message.rollout.rollout_id
                    if rollout_id in wanted:
                        got[rollout_id] = from_proto(message.rollout)
                    else:
                        self.skipped += 1
                if message.cursor:
                    self.cursor = message.cursor
                if len(got) == len(wanted):
                    break
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        finally:
            await stream.aclose()
        return [got[r] for r in rollout_ids if r in got]

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state(self, state: dict[str, Any]) -> None:
        self.cursor = str(state.get("cursor", ""))


def _ints(span: types_pb2.Span, key: str) -> list[int] | None:
    if key not in span.attributes:
        return None
    value = from_attribute_value(span.attributes[key])
    return [int(v) for v in value] if isinstance(value, list) else None


def spans_to_samples(rollout: types_pb2.Rollout, spans: Sequence[types_pb2.Span]) -> RolloutSamples:
    """Transition-mode triplets of one rollout from its spans (sequence order): one per LLM call with prompt and
    response ids (the same call recorded twice, by the proxy and a client hook, counts once); the final reward is
    the last reward span's primary value."""
    samples = RolloutSamples(
        rollout_id=rollout.rollout_id,
        group_id=rollout.group_id,
        status=types_pb2.RolloutStatus.Name(rollout.status).removeprefix("ROLLOUT_STATUS_").lower(),
        attempt_id=rollout.latest_attempt.attempt_id if rollout.HasField("latest_attempt") else "",
        resources_id=rollout.resources_id,
        mode=mode_name(rollout.mode),
    )
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    for span in sorted(spans, key=lambda s: s.sequence_id):
        if span.name == REWARD_SPAN and REWARD_VALUE in span.attributes:
            samples.final_reward = float(from_attribute_value(span.attributes[REWARD_VALUE]))
            continue
        prompt, response = _ints(span, PROMPT_IDS), _ints(span, RESPONSE_IDS)
        if not prompt or not response:
            continue
        key = (tuple(prompt), tuple(response))
        if key in seen:
            continue
        seen.add(key)
        logprobs = None
        if LOGPROBS in span.attributes:
            values = from_attribute_value(span.attributes[LOGPROBS])
            if isinstance(values, list) and len(values) == len(response):
                logprobs = [float(v) for v in values]
        version = (
            from_attribute_value(span.attributes[RESOURCES_VERSION]) if RESOURCES_VERSION in span.attributes else 0
        )
        samples.triplets.append(
            Triplet(
                prompt_ids=prompt,
                response_ids=response,
                logprobs=logprobs,
                turn_index=len(samples.triplets),
                resources_id=str(from_attribute_value(span.attributes[RESOURCES_ID]))
                if RESOURCES_ID in span.attributes
                else rollout.resources_id,
                resources_version=int(version or 0),
            )
        )
    return samples


class SpanTripletSource:
    """Builds triplets from each rollout's latest-attempt spans. It needs no cursor: the trainer asks for the
    rollouts of its batch by id."""

    name = "spans"

    def __init__(self, client: StoreClient, concurrency: int = 16):
        self.client = client
        self._limit = asyncio.Semaphore(concurrency)

    async def _one(self, rollout_id: str) -> RolloutSamples:
        async with self._limit:
            rollout = await self.client.get_rollout(rollout_id)
            spans: list[types_pb2.Span] = []
            attempt = rollout.latest_attempt.attempt_id if rollout.HasField("latest_attempt") else "latest"
            while True:
                page = await self.client.query_spans(rollout_id, attempt, offset=len(spans), limit=500)
                spans.extend(page.spans)
                if not page.spans or len(spans) >= page.page.total:
                    break
            return spans_to_samples(rollout, spans)

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutSamples]:
        return list(await asyncio.wait_for(asyncio.gather(*(self._one(r) for r in rollout_ids)), timeout))

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        pass


class AutoTripletSource:
    """``StreamTripletSource`` while the store serves ``TripletService``; ``SpanTripletSource`` otherwise."""

    def __init__(self, client: StoreClient, mode: str | None = "train"):
        self.stream = StreamTripletSource(client, mode)
        self.spans = SpanTripletSource(client)
        self.active: StreamTripletSource | SpanTripletSource = self.stream

    @property
    def name(self) -> str:
        return self.active.name

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutSamples]:
        if self.active is self.stream:
            try:
                return await self.stream.collect(rollout_ids, timeout)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                self.active = self.spans
        return await self.spans.collect(rollout_ids, timeout)

    def state(self) -> dict[str, Any]:
        return self.stream.state()

    def load_state(self, state: dict[str, Any]) -> None:
        self.stream.load_state(state)


def make_source(kind: str, client: StoreClient, mode: str | None = "train") -> TripletSource:
    """``"stream"``, ``"spans"`` or ``"auto"``."""
    if kind == "stream":
        return StreamTripletSource(client, mode)
    if kind == "spans":
        return SpanTripletSource(client)
    if kind == "auto":
        return AutoTripletSource(client, mode)
    raise ValueError(f"unknown triplet source {kind!r} (stream, spans or auto)")
