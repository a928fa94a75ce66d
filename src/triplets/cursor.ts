import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Where a triplet stream stands, over the matching rollouts in creation order: every position below `watermark` is
 * done, and so are the positions in `done` (rollouts that finished out of order, while an earlier one still runs).
 * A rollout is done once it was sent, or skipped for good (finished, but filtered out).
 */
export interface StreamPosition {
  watermark: number;
  /** Ascending, each above the watermark. */
  done: number[];
}

// A real cursor holds the rollouts finished out of order behind one still running: far fewer than this.
const maxDoneEntries = 10_000_000;

/** Marks `position` done and moves the watermark over every done position that follows it. */
export function markDone(state: StreamPosition, position: number): void {
  if (position < state.watermark) return;
  const { done } = state;
  if (position === state.watermark) {
    state.watermark++;
    let taken = 0;
    while (done[taken] === state.watermark) {
      taken++;
      state.watermark++;
    }
    if (taken > 0) done.splice(0, taken);
    return;
  }
  // Most rollouts finish after those before them: the position then goes at the end.
  const at = done.length === 0 || (done.at(-1) as number) < position ? done.length : firstNotBelow(done, position);
  if (done[at] !== position) done.splice(at, 0, position);
}

/** Whether `position` is still to be done. */
export const isPending = (state: StreamPosition, position: number): boolean =>
  position >= state.watermark && state.done[firstNotBelow(state.done, position)] !== position;

/** The index of the first entry of the ascending `list` not below `value` (its length when none is). */
function firstNotBelow(list: readonly number[], value: number): number {
  let low = 0;
  let high = list.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((list[mid] as number) < value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * Encodes a position as an opaque, URL-safe cursor bound to `filterKey`. Done positions above the watermark are
 * stored as ranges: rollouts finish roughly in order, so the cursor stays small.
 */
export function encodeCursor(state: StreamPosition, filterKey: string): string {
  // Each range of consecutive positions as (gap since the previous range's end, or since the watermark; length).
  const flat: number[] = [];
  let end = state.watermark;
  for (const p of state.done) {
    if (p === end && flat.length > 0) (flat[flat.length - 1] as number)++;
    else flat.push(p - end, 1);
    end = p + 1;
  }
  return Buffer.from(JSON.stringify({ v: 1, f: filterKey, w: state.watermark, r: flat })).toString("base64url");
}

/** Decodes a cursor made by {@link encodeCursor} for the same filters; an empty cursor is the start. */
export function decodeCursor(cursor: string, filterKey: string): StreamPosition {
  if (cursor === "") return { watermark: 0, done: [] };
  let parsed: { v?: unknown; f?: unknown; w?: unknown; r?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new ConnectError("cursor: not a cursor this server issued", Code.InvalidArgument);
  }
  const { v, f, w, r } = parsed;
  const valid =
    v === 1 &&
    typeof w === "number" &&
    Number.isInteger(w) &&
    w >= 0 &&
    Array.isArray(r) &&
    r.length % 2 === 0 &&
    r.every((x) => Number.isInteger(x) && x >= 0);
  if (!valid) throw new ConnectError("cursor: not a cursor this server issued", Code.InvalidArgument);
  if (f !== filterKey) {
    throw new ConnectError(
      "cursor: it was issued for other filters (rollout_ids, group_id, rollout_mode, status_in, resources); resume with the same ones",
      Code.InvalidArgument,
    );
  }
  const flat = r as number[];
  let total = 0;
  for (let i = 1; i < flat.length; i += 2) total += flat[i] as number;
  if (total > maxDoneEntries) throw new ConnectError("cursor: not a cursor this server issued", Code.InvalidArgument);
  const state: StreamPosition = { watermark: w as number, done: [] };
  let at = state.watermark;
  for (let i = 0; i < flat.length; i += 2) {
    at += flat[i] as number;
    for (let k = 0; k < (flat[i + 1] as number); k++) markDone(state, at + k);
    at += flat[i + 1] as number;
  }
  return state;
}

/** A stream's place among the matching rollouts, bound to its filters: what is left, and the cursor after each step. */
export interface StreamCursor {
  /** The first position not yet done: a pass over the rollouts starts there. */
  readonly watermark: number;
  /** Whether the rollout at `position` is still to be sent (or skipped for good). */
  pending(position: number): boolean;
  /** Marks `position` done (sent, or skipped for good). */
  complete(position: number): void;
  /** The cursor as it stands. */
  current(): string;
}

/** Opens a cursor a client sent (empty: the start), for the filters `filterKey` names. */
export function openCursor(cursor: string, filterKey: string): StreamCursor {
  const state = decodeCursor(cursor, filterKey);
  return {
    get watermark() {
      return state.watermark;
    },
    pending: (position) => isPending(state, position),
    complete: (position) => markDone(state, position),
    current: () => encodeCursor(state, filterKey),
  };
}
