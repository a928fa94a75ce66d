import { describe, expect, it } from "vitest";
import { layoutWaterfall, type WaterfallSpan } from "./waterfall.js";

const span = (spanId: string, parentId: string, startTime?: number, endTime?: number, sequenceId = 0): WaterfallSpan => ({
  spanId,
  parentId,
  name: spanId,
  sequenceId,
  startTime,
  endTime,
});

describe("layoutWaterfall", () => {
  it("places children under their parent, depth-first, siblings by start time", () => {
    const layout = layoutWaterfall([
      span("c2", "root", 105, 110, 3),
      span("root", "", 100, 120, 1),
      span("c1", "root", 101, 104, 2),
      span("g1", "c1", 102, 103, 4),
    ]);
    expect(layout.rows.map((r) => [r.span.spanId, r.depth])).toEqual([
      ["root", 0],
      ["c1", 1],
      ["g1", 2],
      ["c2", 1],
    ]);
    expect(layout.start).toBe(100);
    expect(layout.end).toBe(120);
    expect(layout.rows[0]?.childCount).toBe(2);
  });

  it("gives offsets and widths as fractions of the whole range", () => {
    const { rows } = layoutWaterfall([span("root", "", 100, 120), span("c", "root", 105, 110)]);
    expect(rows[0]).toMatchObject({ offset: 0, width: 1, duration: 20 });
    expect(rows[1]?.offset).toBeCloseTo(0.25);
    expect(rows[1]?.width).toBeCloseTo(0.25);
    expect(rows[1]?.duration).toBe(5);
  });

  it("breaks start-time ties by sequence id", () => {
    const { rows } = layoutWaterfall([span("b", "", 100, 101, 2), span("a", "", 100, 101, 1)]);
    expect(rows.map((r) => r.span.spanId)).toEqual(["a", "b"]);
  });

  it("shows spans whose parent is missing as orphan roots", () => {
    const { rows } = layoutWaterfall([span("x", "gone", 100, 101), span("root", "", 99, 102)]);
    expect(rows.map((r) => [r.span.spanId, r.depth, r.orphan])).toEqual([
      ["root", 0, false],
      ["x", 0, true],
    ]);
  });

  it("keeps unfinished spans with zero width and no duration", () => {
    const { rows } = layoutWaterfall([span("root", "", 100, 110), span("open", "root", 105, undefined)]);
    expect(rows[1]).toMatchObject({ width: 0, duration: undefined });
    expect(rows[1]?.offset).toBeCloseTo(0.5);
  });

  it("places every span of a parent cycle once instead of looping", () => {
    const { rows } = layoutWaterfall([span("a", "b", 100, 101), span("b", "a", 101, 102)]);
    expect(rows.map((r) => r.span.spanId).sort()).toEqual(["a", "b"]);
  });

  it("lays out no spans as an empty range", () => {
    expect(layoutWaterfall([])).toEqual({ rows: [], start: 0, end: 0 });
  });
});
