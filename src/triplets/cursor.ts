import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Where a triplet stream stands, over the matching rollouts in creation order: every position below `watermark` is
 * done, and so are the positions in `done` (rollouts that finished out of order, while an earlier one still runs).
 * A rollout is done once it was sent, or skipped for good (finished, but filtered out).
 */
export interface StreamPosition {
  watermark: number;
  done: Set<number>;
}

// A real cursor holds the rollouts finished out of order behind one still running: far fewer than this.
const maxDoneEntries = 10_000_000;

/** Marks `position` done and moves the watermark over every done position that follows it. */
export function markDone(state: StreamPosition, position: number): void {
  if (position < state.watermark) return;
  state.done.add(position);
  while (state.done.delete(state.watermark)) state.watermark++;
}

/**
 * Encodes a position as an opaque, URL-safe cursor bound to `filterKey`. Done positions above the watermark are
 * stored as ranges: rollouts finish roughly in order, so the cursor stays small.
 */
export function encodeCursor(state: StreamPosition, filterKey: string): string {
  const sorted = [...state.done].sort((a, b) => a - b);
  const ranges: [number, number][] = [];
  for (const p of sorted) {
    const last = ranges.at(-1);
    if (last && last[0] + last[1] === p) last[1]++;
    else ranges.push([p, 1]);
  }
  // Each range as (gap since the previous range's end, or since the watermark; length).
  const flat: number[] = [];
  let end = state.watermark;
  for (const [start, len] of ranges) {
    flat.push(start - end, len);
    end = start + len;
  }
  return Buffer.from(JSON.stringify({ v: 1, f: filterKey, w: state.watermark, r: flat })).toString("base64url");
}

/** Decodes a cursor made by {@link encodeCursor} for the same filters; an empty cursor is the start. */
export function decodeCursor(cursor: string, filterKey: string): StreamPosition {
  if (cursor === "") return { watermark: 0, done: new Set() };
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
  const done = new Set<number>();
  let at = w as number;
  for (let i = 0; i < flat.length; i += 2) {
    at += flat[i] as number;
    for (let k = 0; k < (flat[i + 1] as number); k++) done.add(at + k);
    at += flat[i + 1] as number;
  }
  return { watermark: w as number, done };
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
    pending: (position) => position >= state.watermark && !state.done.has(position),
    complete: (position) => markDone(state, position),
    current: () => encodeCursor(state, filterKey),
  };
}
