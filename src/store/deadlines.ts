/**
 * When the watchdog should next look at each rollout: a min-heap of (time, rollout id). A rollout has one live entry,
 * its earliest; scheduling a later time keeps the earlier one (the check then finds the attempt not yet due and
 * schedules it again), so a heartbeat costs nothing here. Entries replaced by an earlier schedule are skipped as they
 * come up.
 */
export interface Deadlines {
  /** Look at `rolloutId` at epoch second `at`, unless it is already due sooner. */
  schedule(rolloutId: string, at: number): void;
  /** Removes and returns the rollouts due at `t` (each once). */
  takeDue(t: number): string[];
  /** Rollouts scheduled. */
  readonly size: number;
  clear(): void;
}

/** Creates an empty {@link Deadlines}. */
export function createDeadlines(): Deadlines {
  const scheduled = new Map<string, number>();
  const heap: { at: number; id: string }[] = [];
  const less = (a: number, b: number) => (heap[a] as { at: number }).at < (heap[b] as { at: number }).at;
  const swap = (a: number, b: number) => {
    const x = heap[a] as { at: number; id: string };
    heap[a] = heap[b] as { at: number; id: string };
    heap[b] = x;
  };
  const push = (entry: { at: number; id: string }) => {
    heap.push(entry);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!less(i, parent)) break;
      swap(i, parent);
      i = parent;
    }
  };
  const pop = () => {
    const top = heap[0];
    const last = heap.pop() as { at: number; id: string };
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(l, m)) m = l;
        if (r < heap.length && less(r, m)) m = r;
        if (m === i) break;
        swap(i, m);
        i = m;
      }
    }
    return top;
  };
  return {
    schedule(rolloutId, at) {
      const current = scheduled.get(rolloutId);
      if (current !== undefined && current <= at) return;
      scheduled.set(rolloutId, at);
      push({ at, id: rolloutId });
    },
    takeDue(t) {
      const due: string[] = [];
      while (heap.length > 0 && (heap[0] as { at: number }).at <= t) {
        const { at, id } = pop() as { at: number; id: string };
        if (scheduled.get(id) !== at) continue;
        scheduled.delete(id);
        due.push(id);
      }
      // Stale entries are dropped as they surface; rebuild when they are most of the heap.
      if (heap.length > 64 && heap.length > 4 * scheduled.size) {
        heap.length = 0;
        for (const [id, at] of scheduled) push({ at, id });
      }
      return due;
    },
    get size() {
      return scheduled.size;
    },
    clear() {
      scheduled.clear();
      heap.length = 0;
    },
  };
}
