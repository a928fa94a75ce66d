import type { Logger } from "../core/logger.js";
import type { StoreEvent } from "./backend.js";

/**
 * The subscribers of one backend's committed events (every backend keeps them the same way). Each `subscribe` is a
 * subscription of its own: a listener subscribed twice receives every event twice, and each returned function ends
 * only its own subscription (calling it again does nothing).
 */
export interface Listeners {
  subscribe(listener: (event: StoreEvent) => void): () => void;
  /** Calls each listener; one that throws is reported and must not undo a committed transaction or starve the others. */
  deliver(event: StoreEvent): void;
  /** Ends every subscription. */
  clear(): void;
}

/** Creates an empty set of subscriptions; a listener that throws is reported to `logger`. */
export function createListeners(logger: Logger): Listeners {
  // One entry per subscription, not per function: the same function may be subscribed more than once.
  const entries = new Set<{ listener: (event: StoreEvent) => void }>();
  return {
    subscribe(listener) {
      const entry = { listener };
      entries.add(entry);
      return () => {
        entries.delete(entry);
      };
    },
    deliver(event) {
      for (const { listener } of entries) {
        try {
          listener(event);
        } catch (error) {
          logger.error("an event listener failed", error);
        }
      }
    },
    clear() {
      entries.clear();
    },
  };
}
