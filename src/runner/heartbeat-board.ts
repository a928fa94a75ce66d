/**
 * A shared-memory board where each pool worker thread stamps the time every few milliseconds from its event loop. A
 * thread whose stamp goes stale has a blocked event loop (a synchronous infinite loop, say); the supervisor sees it
 * without any message from that thread, which could not send one. Layout: per slot, `[threadId, lastBeatMs]` as
 * BigInt64 pairs; a slot with thread id 0 is free.
 */
export interface BoardSlot {
  slot: number;
  threadId: number;
  lastBeatMs: number;
}

/** Allocates a board of `slots` slots. */
export function createHeartbeatBoard(slots: number): SharedArrayBuffer {
  return new SharedArrayBuffer(slots * 2 * BigInt64Array.BYTES_PER_ELEMENT);
}

/** Claims a free slot for `threadId` and stamps it; -1 when the board is full. */
export function claimSlot(board: SharedArrayBuffer, threadId: number): number {
  const cells = new BigInt64Array(board);
  for (let slot = 0; slot < cells.length / 2; slot++) {
    if (Atomics.compareExchange(cells, slot * 2, 0n, BigInt(threadId)) === 0n) {
      beat(board, slot);
      return slot;
    }
  }
  return -1;
}

/** Stamps a slot with the current time. */
export function beat(board: SharedArrayBuffer, slot: number): void {
  Atomics.store(new BigInt64Array(board), slot * 2 + 1, BigInt(Date.now()));
}

/** The occupied slots. */
export function readBoard(board: SharedArrayBuffer): BoardSlot[] {
  const cells = new BigInt64Array(board);
  const out: BoardSlot[] = [];
  for (let slot = 0; slot < cells.length / 2; slot++) {
    const threadId = Number(Atomics.load(cells, slot * 2));
    if (threadId !== 0) out.push({ slot, threadId, lastBeatMs: Number(Atomics.load(cells, slot * 2 + 1)) });
  }
  return out;
}

/** Frees a slot (its thread ended). */
export function releaseSlot(board: SharedArrayBuffer, slot: number): void {
  Atomics.store(new BigInt64Array(board), slot * 2, 0n);
}
