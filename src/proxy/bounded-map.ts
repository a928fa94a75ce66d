/** A map that forgets its oldest entries once it holds more than `maxEntries` or weighs more than `maxWeight`. */
export interface BoundedMap<V> {
  get(key: string): V | undefined;
  /** Stores `value` as the newest entry, `weight` counting against the limit (say, its size in characters). */
  set(key: string, value: V, weight: number): void;
  readonly size: number;
}

/** Creates a {@link BoundedMap}. */
export function createBoundedMap<V>(maxEntries: number, maxWeight: number): BoundedMap<V> {
  const entries = new Map<string, { value: V; weight: number }>();
  let total = 0;
  const drop = (key: string) => {
    const old = entries.get(key);
    if (!old) return;
    total -= old.weight;
    entries.delete(key);
  };
  return {
    get: (key) => entries.get(key)?.value,
    set(key, value, weight) {
      drop(key);
      if (maxEntries <= 0 || weight > maxWeight) return;
      entries.set(key, { value, weight });
      total += weight;
      while (entries.size > maxEntries || total > maxWeight) drop(entries.keys().next().value as string);
    },
    get size() {
      return entries.size;
    },
  };
}
