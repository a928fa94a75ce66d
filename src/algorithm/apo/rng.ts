/**
 * A small seeded pseudo-random generator (mulberry32). APO draws every random choice from it in a fixed order, so a
 * run with the same seed and the same LLM answers makes the same choices — also when it is replayed after a restart.
 */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** A shuffled copy. */
  shuffle<T>(items: readonly T[]): T[];
}

/** Creates a generator from a seed (any integer; only the low 32 bits count). */
export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    shuffle(items) {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(i + 1);
        [out[i], out[j]] = [out[j] as (typeof out)[number], out[i] as (typeof out)[number]];
      }
      return out;
    },
  };
}

/**
 * Endless batches of indices into a dataset of `size` items: each epoch is a fresh shuffle, and a batch never holds
 * the same item twice (a batch as large as the dataset is the whole dataset, shuffled).
 */
export function createBatchIterator(size: number, batchSize: number, rng: Rng): () => number[] {
  const take = Math.min(batchSize, size);
  let order: number[] = [];
  return () => {
    const batch: number[] = [];
    while (batch.length < take) {
      if (order.length === 0) order = rng.shuffle([...Array(size).keys()]);
      const index = order.shift() as number;
      if (!batch.includes(index)) batch.push(index);
      else order.push(index);
    }
    return batch;
  };
}
