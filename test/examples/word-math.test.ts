/** examples/word-math: its calculator tool and its splits (deterministic, disjoint, the test split never trained on). */
import { describe, expect, it } from "vitest";
import { calculate } from "../../examples/word-math/agent.js";
import { SPLITS, splits } from "../../examples/word-math/tasks.js";

describe("examples/word-math", () => {
  it("evaluates one operation on two whole numbers, and nothing else", () => {
    expect(calculate(" 23 + 58")).toBe(81);
    expect(calculate("50 - 17")).toBe(33);
    expect(calculate("4 * 6")).toBe(24);
    expect(calculate("28 / 7")).toBe(4);
    expect(calculate("10 / 0")).toBeUndefined();
    expect(calculate("23 + 58 + 1")).toBeUndefined();
    expect(calculate("the answer")).toBeUndefined();
  });

  it("draws the same disjoint splits every time", () => {
    const a = splits();
    expect(splits()).toEqual(a);
    for (const [name, size] of Object.entries(SPLITS)) expect(a[name as keyof typeof SPLITS]).toHaveLength(size);
    const test = new Set(a.test.map((t) => t.question));
    expect(a.train.some((t) => test.has(t.question))).toBe(false);
    expect(a.val.some((t) => test.has(t.question))).toBe(false);
    expect(a.train.every((t) => Number.isInteger(t.answer) && t.answer > 0)).toBe(true);
  });
});
