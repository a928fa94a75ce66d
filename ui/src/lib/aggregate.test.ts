import { describe, expect, it } from "vitest";
import { bucketCounts, niceBucketSeconds, ratesFromSamples, summarize, summarizeBy } from "./aggregate.js";

describe("summarize", () => {
  it("gives mean, population spread and range, skipping missing values", () => {
    const s = summarize([1, 2, 3, 4, undefined, Number.NaN]);
    expect(s).toMatchObject({ n: 4, mean: 2.5, min: 1, max: 4 });
    expect(s?.std).toBeCloseTo(Math.sqrt(1.25));
  });

  it("is undefined without values", () => {
    expect(summarize([])).toBeUndefined();
  });
});

describe("summarizeBy", () => {
  it("groups by key in ascending order, numeric keys numerically", () => {
    const rows = [
      { step: 10, r: 1 },
      { step: 2, r: 0 },
      { step: 2, r: 1 },
      { step: undefined, r: 5 },
    ];
    const out = summarizeBy(
      rows,
      (x) => x.step,
      (x) => x.r,
    );
    expect(out.map((g) => [g.key, g.summary.mean, g.summary.n])).toEqual([
      [2, 0.5, 2],
      [10, 1, 1],
    ]);
  });

  it("orders string keys naturally (v2 before v10)", () => {
    const out = summarizeBy(
      ["v10", "v2"],
      (k) => k,
      () => 1,
    );
    expect(out.map((g) => g.key)).toEqual(["v2", "v10"]);
  });
});

describe("bucketCounts", () => {
  it("counts events per aligned bucket, with empty buckets kept", () => {
    expect(bucketCounts([100, 101, 125, 200], 100, 130, 10)).toEqual([
      [100, 2],
      [110, 0],
      [120, 1],
      [130, 0],
    ]);
  });

  it("returns nothing for an empty or inverted range", () => {
    expect(bucketCounts([1], 10, 5, 1)).toEqual([]);
    expect(bucketCounts([1], 0, 5, 0)).toEqual([]);
  });
});

describe("niceBucketSeconds", () => {
  it("picks a readable width that keeps buckets under the limit", () => {
    expect(niceBucketSeconds(50)).toBe(1);
    expect(niceBucketSeconds(3600)).toBe(60);
    expect(niceBucketSeconds(86_400)).toBe(1800);
  });
});

describe("ratesFromSamples", () => {
  it("turns counter samples into per-second rates and skips resets", () => {
    expect(
      ratesFromSamples([
        { time: 0, value: 0 },
        { time: 2, value: 10 },
        { time: 4, value: 3 },
        { time: 5, value: 4 },
      ]),
    ).toEqual([
      [2, 5],
      [5, 1],
    ]);
  });
});
