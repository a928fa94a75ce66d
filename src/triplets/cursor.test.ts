import { describe, expect, it } from "vitest";
import { decodeCursor, encodeCursor, isPending, markDone, type StreamPosition } from "./cursor.js";

describe("stream cursor", () => {
  it("round-trips the watermark and out-of-order positions as ranges, bound to its filters", () => {
    const state: StreamPosition = { watermark: 0, done: [] };
    for (const p of [0, 1, 2, 1000, 7, 5, 9, 6, 7]) markDone(state, p);
    expect(state).toEqual({ watermark: 3, done: [5, 6, 7, 9, 1000] });
    const cursor = encodeCursor(state, "k");
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    // Ranges as (gap, length) from the watermark: 5–7, 9, 1000.
    expect(JSON.parse(Buffer.from(cursor, "base64url").toString())).toEqual({ v: 1, f: "k", w: 3, r: [2, 3, 1, 1, 990, 1] });
    expect(decodeCursor(cursor, "k")).toEqual(state);
    expect(() => decodeCursor(cursor, "other")).toThrow(/other filters/);
    expect(() => decodeCursor("e30", "k")).toThrow(/not a cursor/);
    expect([2, 3, 4, 5, 8, 9, 999, 1000, 1001].map((p) => isPending(state, p))).toEqual([
      false,
      true,
      true,
      false,
      true,
      false,
      true,
      false,
      true,
    ]);
    markDone(state, 3);
    markDone(state, 4);
    expect(state).toEqual({ watermark: 8, done: [9, 1000] });
  });
});
