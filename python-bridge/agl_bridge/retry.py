"""The bridge's one retry policy: a few tries with exponential backoff, for calls that are safe to repeat."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["retry"]

_T = TypeVar("_T")


async def retry(
    call: Callable[[], Awaitable[_T]],
    *,
    retryable: Callable[[BaseException], bool],
    attempts: int = 3,
    base_delay: float = 0.1,
    on_retry: Callable[[BaseException, int], None] | None = None,
) -> _T:
    """``await call()``, tried up to ``attempts`` times while it raises an error ``retryable`` accepts, sleeping
    ``base_delay`` seconds after the first failure and twice as long after each next one; the last error is raised.
    ``on_retry(error, attempt)`` is told of each failure that is retried."""
    delay = base_delay
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except Exception as error:
            if attempt == attempts or not retryable(error):
                raise
            if on_retry is not None:
                on_retry(error, attempt)
        await asyncio.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")
