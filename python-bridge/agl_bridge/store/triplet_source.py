"""Where a trainer gets the triplets of finished rollouts: the store's ``TripletService.StreamTriplets``.

Triplets are built from spans in one place only, the TypeScript adapter behind that service (every ``agl serve``
serves it), so what a triplet means — which LLM calls count, how duplicate records of one call collapse, which
reward goes where, how turns merge — cannot depend on the trainer. The Python side reads triplets, never spans; a
store that does not serve ``TripletService`` gets ``TripletServiceMissing``, not a silent fallback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

import grpc

from agl_bridge.errors import StoreError, TripletServiceMissing
from agl_bridge.gen.agl.v1 import triplets_pb2
from agl_bridge.log import get_logger
from agl_bridge.store.client import StoreClient
from agl_bridge.store.triplets import RolloutTriplets

__all__ = ["StreamTripletSource", "TripletServiceMissing", "TripletSource", "read_triplets"]

TripletOptionsLike = triplets_pb2.TripletOptions | Mapping[str, Any] | None

log = get_logger("triplets")
# Pause before reopening a broken stream.
RESUME_DELAY_S = 1.0


class TripletSource(Protocol):
    """Collects the triplets of finished rollouts."""

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutTriplets]:
        """The triplets of each listed (finished) rollout, in the order given; rollouts not delivered within
        ``timeout`` seconds are left out. The training loop starts it while the rollouts still run and may cancel
        it, then collect those that finished: what a cancelled call read must be returned by the next one."""
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
    ``skipped``; the cursor moves past everything read, so a restarted trainer never reads a rollout twice, and a stream
    that breaks (``UNAVAILABLE``: the link dropped) is reopened from it until ``timeout``. What a cancelled ``collect``
    read is held for the next one (the loop reads ahead while rollouts run, then collects those that finished).
    ``options`` (``TripletOptions`` or its JSON form, e.g. ``{"mode": "TRIPLET_MODE_TRAJECTORY"}``) choose how the
    adapter builds them."""

    def __init__(self, client: StoreClient, mode: str | None = "train", options: TripletOptionsLike = None):
        self.client = client
        self.mode = mode
        self.options = options
        self.cursor = ""
        self.skipped = 0
        # Times the stream broke (UNAVAILABLE) and was reopened from its cursor.
        self.resumed = 0
        # Read past the cursor by a collect that was cancelled, for the next one.
        self._held: dict[str, RolloutTriplets] = {}

    async def collect(self, rollout_ids: Sequence[str], timeout: float) -> list[RolloutTriplets]:
        held = self._held
        await self._read(set(rollout_ids) - held.keys(), held, timeout)
        found = [held[r] for r in rollout_ids if r in held]
        # Held rollouts not asked for now (read ahead, then left out of the step: cancelled) are passed over.
        self.skipped += len(held) - len(found)
        held.clear()
        return found

    async def _read(self, missing: set[str], got: dict[str, RolloutTriplets], timeout: float) -> None:
        """Reads from the cursor into ``got`` until no rollout of ``missing`` is missing, or ``timeout``."""
        deadline = time.monotonic() + timeout
        while missing and (remaining := deadline - time.monotonic()) > 0:
            stream = read_triplets(
                self.client, cursor=self.cursor, follow=True, mode=self.mode, options=self.options, timeout=remaining
            )
            try:
                async for message in stream:
                    if message.HasField("rollout"):
                        rollout_id = message.rollout.rollout_id
                        if rollout_id in missing:
                            got[rollout_id] = message.rollout
                            missing.discard(rollout_id)
                        else:
                            self.skipped += 1
                    if message.cursor:
                        self.cursor = message.cursor
                    if not missing:
                        break
            except StoreError as error:
                if error.code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    break
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                # The link dropped: what was read is kept, and the stream reopens from the last cursor (nothing
                # lost, nothing read twice) once the store is reachable again.
                self.resumed += 1
                log.warning("the triplet stream broke (%s); resuming from its cursor", error.details)
                await asyncio.sleep(min(RESUME_DELAY_S, max(0.0, deadline - time.monotonic())))
            finally:
                await stream.aclose()

    def state(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state(self, state: dict[str, Any]) -> None:
        self.cursor = str(state.get("cursor", ""))
