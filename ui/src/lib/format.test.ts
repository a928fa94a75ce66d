import { describe, expect, it } from "vitest";
import {
  formatAgo,
  formatCount,
  formatDuration,
  formatJson,
  formatLogprob,
  formatReward,
  formatSpan,
  formatTime,
  fromDatetimeLocal,
  toDatetimeLocal,
  truncate,
} from "./format.js";

describe("formatTime", () => {
  it("prints epoch seconds in UTC and a dash for no time", () => {
    expect(formatTime(1_764_611_835.9)).toBe("2025-12-01 17:57:15");
    expect(formatTime(undefined)).toBe("—");
    expect(formatTime(0)).toBe("—");
  });
});

describe("formatDuration", () => {
  it("picks the unit that matters", () => {
    expect(formatDuration(0.85)).toBe("850 ms");
    expect(formatDuration(3.1372)).toBe("3.14 s");
    expect(formatDuration(12.34)).toBe("12.3 s");
    expect(formatDuration(245)).toBe("4 m 05 s");
    expect(formatDuration(7380)).toBe("2 h 03 m");
    expect(formatDuration(3 * 86_400 + 4 * 3600)).toBe("3 d 04 h");
    expect(formatDuration(undefined)).toBe("—");
    expect(formatDuration(-5)).toBe("0 ms");
  });
});

describe("formatAgo and formatSpan", () => {
  it("says how long ago, and never for no time", () => {
    expect(formatAgo(100, 100.5)).toBe("just now");
    expect(formatAgo(100, 112.4)).toBe("12 s ago");
    expect(formatAgo(100, 345)).toBe("4 m 05 s ago");
    expect(formatAgo(undefined, 1)).toBe("never");
  });

  it("measures an unfinished span up to now", () => {
    expect(formatSpan(100, undefined, 130)).toBe("30.0 s");
    expect(formatSpan(100, 101, 999)).toBe("1.00 s");
    expect(formatSpan(undefined, 1, 2)).toBe("—");
  });
});

describe("number formatters", () => {
  it("formats counts, rewards and logprobs", () => {
    expect(formatCount(100_000)).toBe("100,000");
    expect(formatReward(1)).toBe("1");
    expect(formatReward(0.12345)).toBe("0.123");
    expect(formatReward(undefined)).toBe("—");
    expect(formatLogprob(Math.log(0.9))).toBe("-0.105 (p=0.90)");
  });

  it("formats JSON with bigints and cuts long text", () => {
    expect(formatJson({ a: 1n })).toBe('{\n  "a": "1"\n}');
    expect(formatJson("plain")).toBe("plain");
    expect(truncate("abcdef", 4)).toBe("abc…");
    expect(truncate("abc", 4)).toBe("abc");
  });
});

describe("datetime-local values", () => {
  it("round-trip epoch seconds to the minute, in local time", () => {
    const epoch = 1_764_611_820; // a whole minute
    expect(fromDatetimeLocal(toDatetimeLocal(epoch))).toBe(epoch);
    expect(toDatetimeLocal(undefined)).toBe("");
    expect(fromDatetimeLocal("")).toBeUndefined();
    expect(fromDatetimeLocal("not a date")).toBeUndefined();
  });
});
