import { describe, expect, it } from "vitest";
import { newRolloutId } from "../../src/store/ids.js";

describe("rollout ids", () => {
  it("keep the documented shape and count up, so consecutive rollouts share index pages", () => {
    const ids = Array.from({ length: 1000 }, newRolloutId);
    for (const id of ids) expect(id).toMatch(/^ro-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
    // Fixed-width hex: string order is numeric order. Steps of one, except across the wrap at 2^48.
    const numbers = ids.map((id) => Number.parseInt(id.slice(3), 16));
    for (let i = 1; i < numbers.length; i++) expect(numbers[i]).toBe((numbers[i - 1]! + 1) % 2 ** 48);
  });
});
