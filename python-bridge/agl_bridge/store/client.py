"""An asyncio client of the agl store (``agl.v1.LightningStore`` and ``agl.v1.ResourceService``) over ``grpc.aio``.

Errors are ``agl_bridge.errors.StoreError`` with the store's gRPC code (``error.code``: ``NOT_FOUND``,
``INVALID_ARGUMENT``, ``UNAUTHENTICATED``...) and message (``error.details``); bad arguments are ``ConfigError``s,
raised before any call. Reads (``WaitForRollouts`` included) and ``AddSpans`` (idempotent by span id) are retried on
``UNAVAILABLE``; calls that change state are never retried automatically, since a retry could apply them twice.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any, Final

import grpc

from agl_bridge.errors import ConfigError, StoreError
from agl_bridge.gen.agl.v1 import (
    resources_pb2,
    store_pb2,
    triplets_pb2,
    types_pb2,
)
from agl_bridge.log import get_logger
from agl_bridge.store import requests as build
from agl_bridge.store.connection import RETRY_ATTEMPTS, RETRY_BASE_DELAY_S, StoreConnection, parse_address
from agl_bridge.store.convert import to_struct, to_value
from agl_bridge.store.requests import AttemptStatusLike, RolloutStatusLike

__all__ = ["StoreClient", "new_group_id", "parse_address"]

log = get_logger("store")

# How much longer than a server-side wait the gRPC deadline is, so the server answers before the deadline fires.
LONG_POLL_MARGIN_S: Final = 5.0


def new_group_id() -> str:
    """A fresh rollout group id (``grp-`` + 16 hex)."""
    return "grp-" + secrets.token_hex(8)


class StoreClient(StoreConnection):
    """An asyncio client of one agl store server.

    ``address`` is ``http://host:port``, ``https://host:port`` (TLS, verified against ``tls.ca_file``, default
    ``$AGL_CA_FILE``, with a client certificate for mutual TLS) or ``host:port``; ``token`` is sent as
    ``authorization: Bearer <token>``; ``timeout`` is the deadline in seconds of each call (long-polls get their wait
    plus a margin). The channel opens on the first call, in the running event loop; use the client as an async
    context manager or call ``close()``.

    Enum arguments take the enum number or its name, with or without prefix and in any case (``"succeeded"``,
    ``"ATTEMPT_STATUS_SUCCEEDED"``, ``types_pb2.ATTEMPT_STATUS_SUCCEEDED``).
    """

    # -- rollouts ----------------------------------------------------------------------------------------------

    async def enqueue_rollouts(
        self,
        inputs: Sequence[Any],
        *,
        mode: int | str | None = None,
        group_id: str = "",
        config: types_pb2.RolloutConfig | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        resources_id: str = "",
    ) -> list[types_pb2.Rollout]:
        """Enqueues one rollout per task input (any JSON value), atomically and in order, and returns them
        (status ``queuing``). ``mode`` is ``"train"``/``"val"``/``"test"`` or a ``RolloutMode``; ``config`` a
        ``RolloutConfig`` or its JSON form (``{"max_attempts": 3, "retry_condition": ["ATTEMPT_STATUS_FAILED"]}``);
        an empty ``resources_id`` means the latest resources. Not retried."""
        if isinstance(inputs, str | bytes | Mapping):
            raise TypeError("inputs is a sequence of task inputs, one per rollout (wrap a single input in a list)")
        return await self._enqueue(
            ((to_value(task_input), group_id) for task_input in inputs), mode, config, metadata, resources_id
        )

    async def enqueue_group(
        self,
        input: Any,
        n: int,
        *,
        group_id: str | None = None,
        mode: int | str | None = None,
        config: types_pb2.RolloutConfig | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        resources_id: str = "",
    ) -> list[types_pb2.Rollout]:
        """Enqueues ``n`` rollouts of the same task input sharing one group id (fresh unless given), as GRPO samples
        a group per task. Returns them in order; ``rollouts[0].group_id`` is the group id. Not retried."""
        if n < 1:
            raise ConfigError(f"a group needs at least one rollout, got n={n}")
        return await self.enqueue_rollouts(
            [input] * n,
            mode=mode,
            group_id=group_id or new_group_id(),
            config=config,
            metadata=metadata,
            resources_id=resources_id,
        )

    async def enqueue_groups(
        self,
        inputs: Sequence[Any],
        n: int,
        *,
        mode: int | str | None = None,
        config: types_pb2.RolloutConfig | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        resources_id: str = "",
    ) -> list[list[types_pb2.Rollout]]:
        """Enqueues ``n`` rollouts of each task input, each task's under a fresh group id, in one atomic call.
        Returns one list of ``n`` rollouts per input, in order. Not retried."""
        if n < 1:
            raise ConfigError(f"a group needs at least one rollout, got n={n}")
        groups = [(to_value(task_input), new_group_id()) for task_input in inputs]
        rollouts = await self._enqueue(
            (group for group in groups for _ in range(n)), mode, config, metadata, resources_id
        )
        return [rollouts[i * n : (i + 1) * n] for i in range(len(inputs))]

    async def _enqueue(
        self,
        rollouts: Iterable[tuple[Any, str]],
        mode: int | str | None,
        config: types_pb2.RolloutConfig | Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        resources_id: str,
    ) -> list[types_pb2.Rollout]:
        """One ``EnqueueRollouts`` call for ``(input value, group id)`` pairs sharing mode, config and metadata."""
        mode_number = build.rollout_mode(mode)
        rollout_config = build.rollout_config(config)
        metadata_struct = None if metadata is None else to_struct(metadata)
        specs = []
        for value, group_id in rollouts:
            spec = types_pb2.RolloutSpec(input=value, mode=mode_number, group_id=group_id, resources_id=resources_id)
            if rollout_config is not None:
                spec.config.CopyFrom(rollout_config)
            if metadata_struct is not None:
                spec.metadata.CopyFrom(metadata_struct)
            specs.append(spec)
        request = store_pb2.EnqueueRolloutsRequest(rollouts=specs)
        response: store_pb2.EnqueueRolloutsResponse = await self._call(self.store.EnqueueRollouts, request)
        return list(response.rollouts)

    async def dequeue(self, limit: int = 1, worker_id: str = "", wait_seconds: float = 0.0) -> list[types_pb2.Rollout]:
        """Claims up to ``limit`` queued rollouts for ``worker_id``, each with its new attempt as ``latest_attempt``.
        With ``wait_seconds`` the server waits that long for work when the queue is empty. Not retried (a lost
        answer would leave claimed rollouts nobody runs; the watchdog requeues them if configured)."""
        request = store_pb2.DequeueRolloutsRequest(limit=limit, worker_id=worker_id, wait_seconds=wait_seconds)
        timeout = self._timeout if wait_seconds <= 0 else wait_seconds + LONG_POLL_MARGIN_S
        response: store_pb2.DequeueRolloutsResponse = await self._call(
            self.store.DequeueRollouts, request, timeout=timeout
        )
        return list(response.rollouts)

    async def get_rollout(self, rollout_id: str) -> types_pb2.Rollout:
        """The rollout with its latest attempt; ``NOT_FOUND`` for an unknown id."""
        request = store_pb2.GetRolloutRequest(rollout_id=rollout_id)
        return await self._call(self.store.GetRollout, request, retry=True)

    async def query_rollouts(
        self,
        *,
        status_in: Iterable[RolloutStatusLike] = (),
        rollout_id_in: Iterable[str] = (),
        rollout_id_contains: str = "",
        group_id: str = "",
        filter_logic: int | str = "and",
        sort_by: str = "",
        sort_order: int | str = "asc",
        limit: int | None = None,
        offset: int = 0,
    ) -> store_pb2.QueryRolloutsResponse:
        """Rollouts matching the given conditions (combined by ``filter_logic``, ``"and"``/``"or"``), paginated;
        ``response.rollouts`` and ``response.page.total``. Empty conditions mean "any"."""
        request = store_pb2.QueryRolloutsRequest(
            status_in=[build.rollout_status(status) for status in status_in],
            rollout_id_in=list(rollout_id_in),
            rollout_id_contains=rollout_id_contains,
            group_id=group_id,
            filter_logic=build.enum_value(types_pb2.FilterLogic, "FILTER_LOGIC_", filter_logic),
            page=build.page(limit, offset, sort_by, sort_order),
        )
        return await self._call(self.store.QueryRollouts, request, retry=True)

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatusLike | None = None,
        input: Any = ...,
        mode: int | str | None = None,
        resources_id: str | None = None,
        config: types_pb2.RolloutConfig | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> types_pb2.Rollout:
        """Replaces the given fields of a rollout (others unchanged). A status is an explicit override: ``"cancelled"``
        also cancels the running attempt; ``"queuing"``/``"requeuing"`` re-enqueue. Not retried."""
        request = store_pb2.UpdateRolloutRequest(rollout_id=rollout_id)
        if status is not None:
            request.status = build.rollout_status(status)
        if input is not ...:
            request.input.CopyFrom(to_value(input))
        if mode is not None:
            request.mode = build.rollout_mode(mode)
        if resources_id is not None:
            request.resources_id = resources_id
        rollout_config = build.rollout_config(config)
        if rollout_config is not None:
            request.config.CopyFrom(rollout_config)
        if metadata is not None:
            request.metadata.CopyFrom(to_struct(metadata))
        return await self._call(self.store.UpdateRollout, request)

    async def wait_for_rollouts(
        self, rollout_ids: Sequence[str], timeout_seconds: float | None
    ) -> list[types_pb2.Rollout]:
        """Waits server-side until every listed rollout is finished or ``timeout_seconds`` pass, and returns the
        finished ones in input order. ``None`` waits without limit; 0 or less returns at once. The gRPC deadline is
        the timeout plus a margin. A wait only reads: one broken by a dropped link (``UNAVAILABLE``) is made again
        for the time left, like the other reads."""
        ends = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        for attempt in range(RETRY_ATTEMPTS):
            request = store_pb2.WaitForRolloutsRequest(rollout_ids=list(rollout_ids))
            deadline: float | None = None
            if ends is not None:
                request.timeout_seconds = ends - time.monotonic()
                deadline = max(request.timeout_seconds, 0.0) + LONG_POLL_MARGIN_S
            try:
                response: store_pb2.WaitForRolloutsResponse = await self._call(
                    self.store.WaitForRollouts, request, timeout=deadline
                )
                return list(response.rollouts)
            except StoreError as error:
                if error.code != grpc.StatusCode.UNAVAILABLE or attempt == RETRY_ATTEMPTS - 1:
                    raise
                log.warning("the wait for rollouts broke (%s); waiting again for the time left", error.details)
                await asyncio.sleep(RETRY_BASE_DELAY_S * 2**attempt)
        raise AssertionError("unreachable")

    # -- attempts and spans ------------------------------------------------------------------------------------

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        status: AttemptStatusLike | None = None,
        *,
        worker_id: str | None = None,
        last_heartbeat_time: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> types_pb2.Attempt:
        """Replaces the given fields of an attempt (``attempt_id`` may be ``"latest"``); a status on the latest
        attempt also moves the rollout (``succeeded`` finishes it, ``failed`` may requeue it). Not retried."""
        request = store_pb2.UpdateAttemptRequest(rollout_id=rollout_id, attempt_id=attempt_id)
        if status is not None:
            request.status = build.attempt_status(status)
        if worker_id is not None:
            request.worker_id = worker_id
        if last_heartbeat_time is not None:
            request.last_heartbeat_time = last_heartbeat_time
        if metadata is not None:
            request.metadata.CopyFrom(to_struct(metadata))
        return await self._call(self.store.UpdateAttempt, request)

    async def get_latest_attempt(self, rollout_id: str) -> types_pb2.Attempt | None:
        """The rollout's latest attempt, ``None`` when it has none yet."""
        request = store_pb2.GetLatestAttemptRequest(rollout_id=rollout_id)
        response: store_pb2.GetLatestAttemptResponse = await self._call(
            self.store.GetLatestAttempt, request, retry=True
        )
        return response.attempt if response.HasField("attempt") else None

    async def add_spans(self, spans: Sequence[types_pb2.Span]) -> list[store_pb2.SpanAck]:
        """Stores a batch of spans (build them with ``make_span``); returns one ack per span, in order, with its
        sequence id, whether it was a duplicate and the attempt's status (``cancelled`` means stop the agent).
        Retried on UNAVAILABLE: the store is idempotent by (rollout, attempt, span id)."""
        request = store_pb2.AddSpansRequest(spans=list(spans))
        response: store_pb2.AddSpansResponse = await self._call(self.store.AddSpans, request, retry=True)
        return list(response.acks)

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str = "",
        *,
        name: str = "",
        after_sequence_id: int = 0,
        limit: int | None = None,
        offset: int = 0,
    ) -> store_pb2.QuerySpansResponse:
        """Spans of a rollout in sequence order: of one attempt (an id or ``"latest"``) or, with ``""``, of all;
        ``after_sequence_id`` reads incrementally. ``response.spans`` and ``response.page.total``."""
        request = store_pb2.QuerySpansRequest(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            name=name,
            after_sequence_id=after_sequence_id,
            page=build.page(limit, offset, "", "asc"),
        )
        return await self._call(self.store.QuerySpans, request, retry=True)

    async def statistics(self) -> store_pb2.Statistics:
        """Counts of rollouts, attempts, spans, resources and workers, the queue length and the backend name."""
        return await self._call(self.store.GetStatistics, store_pb2.GetStatisticsRequest(), retry=True)

    # -- resources ---------------------------------------------------------------------------------------------

    async def add_resources(self, resources: Mapping[str, types_pb2.Resource]) -> types_pb2.ResourcesUpdate:
        """Publishes a new snapshot under a fresh id (version 1); it becomes the latest. Not retried."""
        request = resources_pb2.AddResourcesRequest(resources=dict(resources))
        return await self._call(self.resources.AddResources, request)

    async def update_resources(
        self,
        resources_id: str,
        resources: Mapping[str, types_pb2.Resource],
        create_if_missing: bool = False,
    ) -> types_pb2.ResourcesUpdate:
        """Publishes the next version of snapshot ``resources_id``; it becomes the latest. An unknown id is
        ``NOT_FOUND`` unless ``create_if_missing``. Not retried."""
        request = resources_pb2.UpdateResourcesRequest(
            resources_id=resources_id, resources=dict(resources), create_if_missing=create_if_missing
        )
        return await self._call(self.resources.UpdateResources, request)

    async def get_resources(self, resources_id: str) -> types_pb2.ResourcesUpdate:
        """The latest version of snapshot ``resources_id``; ``NOT_FOUND`` for an unknown id."""
        request = resources_pb2.GetResourcesRequest(resources_id=resources_id)
        return await self._call(self.resources.GetResources, request, retry=True)

    async def get_latest_resources(self) -> types_pb2.ResourcesUpdate | None:
        """The snapshot published last, ``None`` while nothing has been published."""
        response: resources_pb2.GetLatestResourcesResponse = await self._call(
            self.resources.GetLatestResources, resources_pb2.GetLatestResourcesRequest(), retry=True
        )
        return response.resources if response.HasField("resources") else None

    async def watch_resources(self, include_latest: bool = False) -> AsyncGenerator[types_pb2.ResourcesUpdate, None]:
        """Yields every snapshot as it is published, in order, until the caller stops iterating (the stream has no
        deadline). With ``include_latest`` the current latest snapshot, if any, comes first — receiving it also
        tells the caller the subscription is live. Close it with ``contextlib.aclosing`` or by breaking out."""
        request = resources_pb2.WatchResourcesRequest(include_latest=include_latest)
        async for update in self._stream(self.resources.WatchResources(request, metadata=self._metadata)):
            yield update

    # -- triplets ----------------------------------------------------------------------------------------------

    async def stream_triplets(
        self,
        *,
        cursor: str = "",
        follow: bool = False,
        rollout_ids: Sequence[str] = (),
        group_id: str = "",
        mode: int | str | None = None,
        resources_id: str = "",
        resources_version: int = 0,
        status_in: Iterable[RolloutStatusLike] = (),
        options: triplets_pb2.TripletOptions | Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[triplets_pb2.StreamTripletsResponse, None]:
        """Yields ``StreamTripletsResponse`` messages (one finished rollout each, or a ``caught_up`` marker) after
        ``cursor``. Keep the last ``response.cursor`` you handled and pass it back to resume with nothing lost or
        repeated (a cursor belongs to the ``rollout_ids``/``group_id`` filters it was issued for). With ``follow`` the
        stream stays open until the caller stops iterating or ``timeout`` (seconds) passes."""
        request = triplets_pb2.StreamTripletsRequest(
            rollout_ids=list(rollout_ids),
            group_id=group_id,
            rollout_mode=build.rollout_mode(mode),
            resources_id=resources_id,
            resources_version=resources_version,
            status_in=[build.rollout_status(status) for status in status_in],
            cursor=cursor,
            follow=follow,
        )
        build.triplet_options(request.options, options)
        async for response in self._stream(
            self.triplets.StreamTriplets(
                request, timeout=timeout, metadata=self._metadata, wait_for_ready=self._reached
            )
        ):
            yield response

    async def get_rollout_triplets(
        self,
        rollout_id: str,
        attempt_id: str = "",
        options: triplets_pb2.TripletOptions | Mapping[str, Any] | None = None,
    ) -> triplets_pb2.RolloutTriplets:
        """The triplets of one rollout (latest attempt unless ``attempt_id`` is given), finished or not."""
        request = triplets_pb2.GetRolloutTripletsRequest(rollout_id=rollout_id, attempt_id=attempt_id)
        build.triplet_options(request.options, options)
        return await self._call(self.triplets.GetRolloutTriplets, request, retry=True)
