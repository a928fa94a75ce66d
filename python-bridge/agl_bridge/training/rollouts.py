"""The loop's rollouts in the store: enqueued as groups with the loop's retry settings, waited for, and cancelled when
they run late or are no longer wanted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agl_bridge.gen.agl.v1 import types_pb2
from agl_bridge.log import get_logger
from agl_bridge.store.client import StoreClient
from agl_bridge.training.config import LoopConfig
from agl_bridge.training.empty_steps import EmptyStepGuard

__all__ = ["Rollouts"]

log = get_logger("training")

# How many cancellations go to the store at once, and for how long in all.
_CANCEL_CONCURRENCY, _CANCEL_TIMEOUT_S = 32, 10.0


class Rollouts:
    """Rollout groups of the loop at ``client``, under ``config``'s attempt settings and timeouts."""

    def __init__(self, client: StoreClient, config: LoopConfig, guard: EmptyStepGuard | None = None) -> None:
        self.client, self.config = client, config
        # Told what did not succeed, so that a run whose rollouts all fail stops, saying why.
        self.guard = guard or EmptyStepGuard(config.max_empty_steps)

    def attempt_config(self) -> dict[str, Any]:
        """The ``RolloutConfig`` of every rollout the loop enqueues: retried attempts, the watchdog's timeout."""
        return {
            "max_attempts": self.config.max_attempts,
            "timeout_seconds": self.config.attempt_timeout,
            "retry_condition": ["ATTEMPT_STATUS_FAILED", "ATTEMPT_STATUS_TIMEOUT", "ATTEMPT_STATUS_UNRESPONSIVE"],
        }

    async def enqueue(
        self, tasks: Sequence[Any], n: int, *, mode: str, resources_id: str, metadata: dict[str, Any]
    ) -> list[list[types_pb2.Rollout]]:
        """``n`` rollouts of each task, one group per task."""
        return await self.client.enqueue_groups(
            tasks, n, mode=mode, resources_id=resources_id, config=self.attempt_config(), metadata=metadata
        )

    async def finished(self, ids: Sequence[str]) -> list[types_pb2.Rollout]:
        """Those of ``ids`` that have finished, now (no wait)."""
        return await self.client.wait_for_rollouts(ids, 0) if ids else []

    async def wait(self, ids: list[str], timeout: float | None = None) -> list[str]:
        """Waits up to ``timeout`` (default ``rollout_timeout``) seconds for ``ids``; cancels those still running
        then; returns the finished ones, in order."""
        timeout = self.config.rollout_timeout if timeout is None else timeout
        finished = await self.client.wait_for_rollouts(ids, timeout)
        done = {r.rollout_id for r in finished}
        late = [r for r in ids if r not in done]
        self.guard.saw(finished, late, timeout)
        if late:
            cancelled = await self.cancel(late)
            log.info("%d rollouts did not finish within %.0f s: %s cancelled", len(late), timeout, cancelled)
        return [r for r in ids if r in done]

    async def cancel(self, ids: Sequence[str]) -> int | None:
        """Marks ``ids`` cancelled, concurrently and for at most a few seconds; returns how many it cancelled (those
        finished meanwhile refuse, quietly), or None when it could not finish (the error is logged)."""
        limit = asyncio.Semaphore(_CANCEL_CONCURRENCY)

        async def cancel(rollout_id: str) -> bool:
            async with limit:
                try:
                    await self.client.update_rollout(rollout_id, status="cancelled")
                    return True
                except Exception:  # noqa: BLE001 - finished meanwhile, or the store is going away too
                    return False

        try:
            return sum(await asyncio.wait_for(asyncio.gather(*(cancel(r) for r in ids)), _CANCEL_TIMEOUT_S))
        except Exception as error:  # noqa: BLE001 - best effort (TimeoutError included)
            log.warning("could not cancel %d rollouts (%r)", len(ids), error)
            return None
