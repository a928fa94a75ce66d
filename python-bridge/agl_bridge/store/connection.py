"""The connection under ``StoreClient``: the store's address, the lazily opened ``grpc.aio`` channel and its stubs,
and the one way a unary call is made (the client's metadata and deadline, ``StoreError`` for a failed call, retries
of the calls safe to repeat)."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import EllipsisType, TracebackType
from typing import Any, Final, Self, TypeVar
from urllib.parse import urlsplit

import grpc
import grpc.aio

from agl_bridge.errors import ConfigError, StoreError
from agl_bridge.gen.agl.v1 import resources_pb2_grpc, store_pb2_grpc, triplets_pb2_grpc
from agl_bridge.retry import retry as retry_call
from agl_bridge.store.network import ClientTls

__all__ = ["StoreConnection", "keepalive_ms", "parse_address"]

_T = TypeVar("_T")

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
# Tries of a retryable call, and the first backoff (doubled after each failure).
RETRY_ATTEMPTS: Final = 3
RETRY_BASE_DELAY_S: Final = 0.1
KEEPALIVE_MS: Final = 10_000
# Overrides KEEPALIVE_MS, in seconds: a shorter period finds a dropped link sooner (``agl run --keepalive``'s twin).
KEEPALIVE_ENV: Final = "AGL_KEEPALIVE_S"


def keepalive_ms() -> int:
    """The keepalive period: ``$AGL_KEEPALIVE_S`` seconds, else ``KEEPALIVE_MS``."""
    value = os.environ.get(KEEPALIVE_ENV, "").strip()
    if not value:
        return KEEPALIVE_MS
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise ConfigError(f"${KEEPALIVE_ENV}={value!r}: give the keepalive period in seconds (0 < s <= 3600)")
    return round(seconds * 1000)


def parse_address(address: str) -> tuple[str, bool]:
    """Splits ``http://host:port``, ``https://host:port`` or ``host:port`` into a gRPC target and whether the
    channel uses TLS (only ``https``). Other gRPC targets (``unix:/path``, ``dns:///host:port``) pass through."""
    address = address.strip()
    if not address:
        raise ConfigError("empty store address: give http://HOST:PORT")
    lowered = address.lower()
    if not lowered.startswith(("http://", "https://")):
        return address, False
    parts = urlsplit(address)
    if not parts.hostname:
        raise ConfigError(f"no host in store address {address!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"store address {address!r} must not have a path")
    secure = parts.scheme.lower() == "https"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = parts.port if parts.port is not None else (443 if secure else 80)
    return f"{host}:{port}", secure


class StoreConnection:
    """The channel to one store server and its stubs (see ``StoreClient``)."""

    def __init__(
        self, address: str, token: str | None = None, *, timeout: float = 30.0, tls: ClientTls | None = None
    ) -> None:
        self._target, self._secure = parse_address(address)
        self._tls = tls or ClientTls.from_env()
        # Whether the store has answered once: from then on calls wait out a dropped link (``wait_for_ready``).
        self._reached = False
        self._timeout = timeout
        self._metadata: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel: grpc.aio.Channel | None = None
        self._store_stub: store_pb2_grpc.LightningStoreStub | None = None
        self._resources_stub: resources_pb2_grpc.ResourceServiceStub | None = None
        self._triplets_stub: triplets_pb2_grpc.TripletServiceStub | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The gRPC target, ``host:port``."""
        return self._target

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The metadata sent with every call (the authorization header), for calls made on the raw stubs."""
        return self._metadata

    @property
    def store(self) -> store_pb2_grpc.LightningStoreStub:
        """The raw ``LightningStore`` stub, for RPCs this class does not wrap (pass ``metadata=client.metadata``)."""
        self._connect()
        assert self._store_stub is not None
        return self._store_stub

    @property
    def resources(self) -> resources_pb2_grpc.ResourceServiceStub:
        """The raw ``ResourceService`` stub (pass ``metadata=client.metadata``)."""
        self._connect()
        assert self._resources_stub is not None
        return self._resources_stub

    @property
    def triplets(self) -> triplets_pb2_grpc.TripletServiceStub:
        """The raw ``TripletService`` stub (pass ``metadata=client.metadata``)."""
        self._connect()
        assert self._triplets_stub is not None
        return self._triplets_stub

    def _connect(self) -> None:
        if self._closed:
            raise RuntimeError("StoreClient is closed")
        if self._channel is not None:
            return
        keepalive = keepalive_ms()
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            # While calls are in flight, ping every 10 s ($AGL_KEEPALIVE_S) and drop a connection whose ping goes
            # unanswered as long: a cut network fails the calls with UNAVAILABLE (and the channel reconnects) instead
            # of stalling them until their deadlines, as the TypeScript clients do.
            ("grpc.keepalive_time_ms", keepalive),
            ("grpc.keepalive_timeout_ms", keepalive),
            ("grpc.http2.max_pings_without_data", 0),
            # Back on its feet soon after a cut: reconnect tries at most 5 s apart (gRPC's default cap is 120 s).
            ("grpc.max_reconnect_backoff_ms", 5000),
        ]
        if self._secure:
            self._channel = grpc.aio.secure_channel(self._target, self._tls.grpc_credentials(), options=options)
        else:
            self._channel = grpc.aio.insecure_channel(self._target, options=options)
        self._store_stub = store_pb2_grpc.LightningStoreStub(self._channel)
        self._resources_stub = resources_pb2_grpc.ResourceServiceStub(self._channel)
        self._triplets_stub = triplets_pb2_grpc.TripletServiceStub(self._channel)

    async def close(self) -> None:
        """Closes the channel, cancelling calls in flight. Idempotent."""
        self._closed = True
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(
        self,
        method: Callable[..., Awaitable[_T]],
        request: Any,
        *,
        retry: bool = False,
        timeout: float | None | EllipsisType = ...,
    ) -> _T:
        """One unary call with the client's metadata and deadline; ``retry`` retries UNAVAILABLE with backoff."""
        deadline = self._timeout if isinstance(timeout, EllipsisType) else timeout

        async def call() -> _T:
            try:
                # Once the store has answered, a call made while the link is down waits for the channel to
                # reconnect (up to its deadline) rather than failing at once: nothing was sent, so waiting is safe
                # for every call. A store never reached still fails fast with UNAVAILABLE.
                answer = await method(request, timeout=deadline, metadata=self._metadata, wait_for_ready=self._reached)
                self._reached = True
                return answer
            except grpc.aio.AioRpcError as error:
                raise StoreError.from_rpc(error, target=self._target) from error

        return await retry_call(
            call,
            retryable=lambda error: isinstance(error, StoreError) and error.code == grpc.StatusCode.UNAVAILABLE,
            attempts=RETRY_ATTEMPTS if retry else 1,
            base_delay=RETRY_BASE_DELAY_S,
        )

    async def _stream(self, call: grpc.aio.UnaryStreamCall[Any, _T]) -> AsyncGenerator[_T, None]:
        """The messages of a server stream, with ``StoreError`` for a failed one; the call is cancelled once the
        caller stops reading."""
        try:
            async for message in call:
                yield message
        except grpc.aio.AioRpcError as error:
            raise StoreError.from_rpc(error, target=self._target) from error
        finally:
            call.cancel()
