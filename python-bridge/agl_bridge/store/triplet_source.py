"""Where a trainer gets the triplets of finished rollouts: the store's ``TripletService.StreamTriplets``.

Triplets are built from spans in one place only, the TypeScript adapter behind that service (every ``agl serve``
serves it), so what a triplet means — which LLM calls count, how duplicate records of one call collapse, which
reward goes where, how turns merge — cannot depend on the trainer. The Python side reads triplets, never spans; a
store that does not serve ``TripletService`` gets ``TripletServiceMissing``, not a silent fallback.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

import grpc

from agl_bridge.errors import StoreError, TripletServiceMissing
from agl_bridge.gen.agl.v1 import triplets_pb2
from agl_bridge.store.client import StoreClient
from agl_bridge.store.triplets import RolloutTriplets

__all__ = ["StreamTripletSource", "TripletServiceMissing", "TripletSource", "read_triplets"]

TripletOptionsLike = triplets_pb2.TripletOptions | Mapping[str, Any] | None


class TripletSource(Protocol):
    """Collects the triplets of finished rollouts."""

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutTriplets]:
        """The triplets of each listed (finished) rollout, in the order given; rollouts not delivered within
        ``timeout`` seconds are left out."""
        ...

    def state(self) -> dict[str, Any]:
        """What to keep in a checkpoint to resume."""
        ...

    def load_state(self, state: dict[str, Any]) -> None: ...


async def read_triplets(
    client: StoreClient, **request: Any
) -> AsyncGenerator[triplets_pb2.StreamTripletsResponse, None]:
    """``client.stream_triplets(**request)``, with ``TripletServiceMissing`` instead of a bare ``UNIMPLEMENTED``."""
    stream = client.stream_triplets(**request)
    try:
        async for message in stream:
            yield message
    except StoreError as error:
        if error.code == grpc.StatusCode.UNIMPLEMENTED:
            raise TripletServiceMissing(client.target) from error
        raise
    finally:
        await stream.aclose()


class StreamTripletSource:
    """Reads ``StreamTriplets`` (``mode`` rollouts, following) from the saved cursor until every wanted rollout
    arrived. Messages of other rollouts (late stragglers of earlier steps) are passed over and counted in
    ``skipped``; the cursor moves past everything read, so a restarted trainer never reads a rollout twice.
    ``options`` (``TripletOptions`` or its JSON form, e.g. ``{"mode": "TRIPLET_MODE_TRAJECTORY"}``) choose how the
    adapter builds them."""

    def __init__(self, client: StoreClient, mode: str | None = "train", options: TripletOptionsLike = None):
        self.client = client
        self.mode = mode
        self.options = options
        self.cursor = ""
        self.skipped = 0

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutTriplets]:
        wanted = set(rollout_ids)
        got: dict[str, RolloutTriplets] = {}
        stream = read_triplets(
            self.client, cursor=self.cursor, follow=True, mode=self.mode, options=self.options, timeout=timeout
        )
        try:
            async for message in stream:
                if message.HasField("rollout"):
                    rollout_id = message.rollout.rollout_id
                    if rollout_id in wanted:
                        got[rollout_id] = message.rollout
                    else:
                        self.skipped += 1
                if message.cursor:
                    self.cursor = message.cursor
                if len(got) == len(wanted):
                    break
        except StoreError as error:
            if error.code != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
        finally:
            await stream.aclose()
        return [got[r] for r in rollout_ids if r in got]

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state(self, state: dict[str, Any]) -> None:
        self.cursor = str(state.get("cursor", ""))
