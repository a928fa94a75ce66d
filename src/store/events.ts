import type { StoreEvent } from "./backend.js";

/** Calls each listener; one that throws must not undo a committed transaction or starve the others. */
export function deliver(listeners: Iterable<(event: StoreEvent) => void>, event: StoreEvent): void {
  for (const listener of listeners) {
    try {
      listener(event);
    } catch (error) {
      console.error("agl store: event listener failed", error);
    }
  }
}
