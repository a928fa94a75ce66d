import type { Logger } from "../core/logger.js";
import type { StorageBackend, StoreEvent } from "./backend.js";
import { createListeners } from "./listeners.js";

/** A pending wait for a matching event; `cancel` releases it when the caller stops waiting. */
export interface PendingWait {
  promise: Promise<void>;
  cancel(): void;
}

/** Long-poll support: waits for committed store events, bounded by a timeout and an AbortSignal. */
export interface Waiters {
  /**
   * Arms a wait for the next event that `matches`. Arm before checking the state you wait on, then await the
   * promise only if the check found nothing: no event can slip between the check and the wait.
   */
  arm(matches: (event: StoreEvent) => boolean, timeoutSeconds: number, signal?: AbortSignal): PendingWait;
  /** Every event, as it is committed (for streams such as WatchResources); subscribed as `StorageBackend.subscribe`. */
  listen(listener: (event: StoreEvent) => void): () => void;
  close(): void;
}

/** Waiters over `backend`'s events; a listener of `listen` that throws is reported to `logger`. */
export function createWaiters(backend: StorageBackend, logger: Logger): Waiters {
  const pending = new Set<{ matches: (event: StoreEvent) => boolean; wake: () => void }>();
  const listeners = createListeners(logger);
  const unsubscribe = backend.subscribe((event) => {
    for (const entry of pending) if (entry.matches(event)) entry.wake();
    listeners.deliver(event);
  });
  return {
    arm(matches, timeoutSeconds, signal) {
      let cancel = () => {};
      const promise = new Promise<void>((resolve) => {
        const entry = { matches, wake: () => cancel() };
        const onAbort = () => cancel();
        const timer = Number.isFinite(timeoutSeconds) ? setTimeout(() => cancel(), Math.max(0, timeoutSeconds * 1000)) : undefined;
        cancel = () => {
          pending.delete(entry);
          if (timer) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        };
        pending.add(entry);
        if (signal?.aborted) cancel();
        else signal?.addEventListener("abort", onAbort, { once: true });
      });
      return { promise, cancel: () => cancel() };
    },
    listen(listener) {
      return listeners.subscribe(listener);
    },
    close() {
      unsubscribe();
      for (const entry of pending) entry.wake();
      listeners.clear();
    },
  };
}
