import type { StoreApi } from "./store-api.js";

/**
 * Writes a component in the store's own process has promised but not finished, by rollout. The LLM proxy of
 * `agl serve --proxy` answers its client first and stores the call's span right after; it registers that write here,
 * in the same tick as it ends the answer, so every store call that can follow from the answer sees the span.
 */
export interface PendingWrites {
  /** Registers a write in flight for a rollout; it is forgotten once it settles (whether it succeeded or not). */
  add(rolloutId: string, write: Promise<unknown>): void;
  /** Resolves once every write registered so far for the rollout has settled; undefined when none is in flight. */
  settled(rolloutId: string): Promise<void> | undefined;
}

/** Creates an empty {@link PendingWrites}. */
export function createPendingWrites(): PendingWrites {
  const inFlight = new Map<string, Set<Promise<unknown>>>();
  return {
    add(rolloutId, write) {
      let writes = inFlight.get(rolloutId);
      if (!writes) {
        writes = new Set();
        inFlight.set(rolloutId, writes);
      }
      const tracked = write.then(
        () => undefined,
        () => undefined,
      );
      writes.add(tracked);
      void tracked.then(() => {
        writes.delete(tracked);
        if (writes.size === 0 && inFlight.get(rolloutId) === writes) inFlight.delete(rolloutId);
      });
    },
    settled(rolloutId) {
      const writes = inFlight.get(rolloutId);
      if (!writes || writes.size === 0) return undefined;
      return Promise.all(writes).then(() => undefined);
    },
  };
}

type Ordered = Pick<StoreApi, "updateAttempt" | "updateRollout" | "querySpans">;

/**
 * The calls that must come after the rollout's pending writes: updates, which may finish the attempt or the rollout
 * (a runner reports an attempt done once its agent got its answers: the spans of those answers must be in first), and
 * span reads. Every other call goes straight through.
 */
export function afterPendingWrites(pending: PendingWrites, methods: Ordered): Ordered {
  const wait = (rolloutId: string | undefined) => (rolloutId ? pending.settled(rolloutId) : undefined);
  return {
    async updateAttempt(init, options) {
      await wait(init.rolloutId);
      return methods.updateAttempt(init, options);
    },
    async updateRollout(init, options) {
      await wait(init.rolloutId);
      return methods.updateRollout(init, options);
    },
    async querySpans(init, options) {
      await wait(init.rolloutId);
      return methods.querySpans(init, options);
    },
  };
}
