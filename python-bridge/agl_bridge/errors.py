"""The bridge's errors: one base, ``AglError``, and one subclass per party that can fail.

``ConfigError`` and ``DataError`` are also ``ValueError``s (bad settings, bad data handed in), so code that caught
``ValueError`` before still does; ``StoreError`` carries the store's gRPC status code; ``ProxyAdminError`` and
``TripletServiceMissing`` name the LLM proxy and the store's triplet service. Entry points turn an ``AglError`` into a
one-line message and an exit status; library code never exits.
"""

from __future__ import annotations

import grpc

__all__ = [
    "AglError",
    "ConfigError",
    "DataError",
    "ProxyAdminError",
    "StoreError",
    "TripletServiceMissing",
]


class AglError(Exception):
    """Base of every error the bridge raises on purpose."""


class ConfigError(AglError, ValueError):
    """A setting, argument or address the bridge cannot work with; the message says which and what to give."""


class DataError(AglError, ValueError):
    """Data the bridge cannot use as it is: a batch with no trainable row, mismatched masks, a number a protobuf
    ``Value`` cannot hold."""


class StoreError(AglError):
    """A store call failed: ``code`` is the gRPC status (``NOT_FOUND``, ``INVALID_ARGUMENT``, ``UNAUTHENTICATED``,
    ``UNAVAILABLE``...), ``details`` the store's message, ``method`` the RPC."""

    def __init__(
        self, code: grpc.StatusCode, details: str, *, method: str = "", target: str = "", message: str | None = None
    ) -> None:
        self.code, self.details, self.method, self.target = code, details, method, target
        where = f" at {target}" if target else ""
        call = f"{method} " if method else "a call "
        super().__init__(message or f"{call}failed on the store{where}: {code.name}: {details}")

    @classmethod
    def from_rpc(cls, error: grpc.aio.AioRpcError, *, method: str = "", target: str = "") -> StoreError:
        return cls(error.code(), error.details() or "", method=method, target=target)


class ProxyAdminError(AglError):
    """The LLM proxy's admin routes could not be reached, refused the request or answered something unexpected."""


class TripletServiceMissing(StoreError):
    """The store answered ``UNIMPLEMENTED`` to ``StreamTriplets``: it does not serve ``agl.v1.TripletService``."""

    def __init__(self, target: str) -> None:
        super().__init__(
            grpc.StatusCode.UNIMPLEMENTED,
            "agl.v1.TripletService is not served",
            method="StreamTriplets",
            target=target,
            message=f"the store at {target} does not serve agl.v1.TripletService, which trainers read triplets from "
            "(triplets are built from spans by the TypeScript adapter in the store server, never in Python); "
            "point the trainer at an `agl serve` store server",
        )
