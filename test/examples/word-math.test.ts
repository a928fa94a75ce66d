/** examples/word-math: its calculator tool and its splits (deterministic, disjoint, the test split never trained on). */
import { describe, expect, it } from "vitest";
import { calculate } from "../../examples/word-math/agent.js";
import { SPLITS, splits } from "../../examples/word-math/tasks.js";

describe("examples/word-math", () => {
  it("evaluates + - * / with precedence and parentheses on whole numbers, and nothing else", () => {
    expect(calculate(" 23 + 58")).toBe(81);
    expect(calculate("50 - 4 * 6")).toBe(26);
    expect(calculate("7 * 8 - 5")).toBe(51);
    expect(calculate("34 + 21 - 18")).toBe(37);
    expect(calculate("(19 + 17) / 4")).toBe(9);
    expect(calculate("10 / 4")).toBe(2.5);
    expect(calculate("10 / (3 - 3)")).toBeUndefined();
    expect(calculate("(19 + 17")).toBeUndefined();
    expect(calculate("12 +")).toBeUndefined();
    expect(calculate("4 * 6 apples")).toBeUndefined();
    expect(calculate("the answer")).toBeUndefined();
    expect(calculate("")).toBeUndefined();
  });

  it("draws the same disjoint splits every time", () => {
    const a = splits();
    expect(splits()).toEqual(a);
    for (const [name, size] of Object.entries(SPLITS)) expect(a[name as keyof typeof SPLITS]).toHaveLength(size);
    const test = new Set(a.test.map((t) => t.question));
    expect(a.train.some((t) => test.has(t.question))).toBe(false);
    expect(a.val.some((t) => test.has(t.question))).toBe(false);
    expect(a.train.every((t) => Number.isInteger(t.answer) && t.answer > 0)).toBe(true);
    expect(a.test.every((t) => Number.isInteger(t.answer) && t.answer > 0)).toBe(true);
  });
});
