import { describe, expect, it } from "vitest";
import { decodeCursor, encodeCursor, markDone } from "./cursor.js";

describe("stream cursor", () => {
  it("round-trips the watermark and out-of-order positions as ranges, bound to its filters", () => {
    const state = { watermark: 0, done: new Set<number>() };
    for (const p of [0, 1, 2, 5, 6, 7, 9, 1000]) markDone(state, p);
    expect(state.watermark).toBe(3);
    const cursor = encodeCursor(state, "k");
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(cursor, "k")).toEqual(state);
    expect(() => decodeCursor(cursor, "other")).toThrow(/other filters/);
    expect(() => decodeCursor("e30", "k")).toThrow(/not a cursor/);
    markDone(state, 3);
    markDone(state, 4);
    expect(state).toEqual({ watermark: 8, done: new Set([9, 1000]) });
  });
});
