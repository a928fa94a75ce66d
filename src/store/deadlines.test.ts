import { describe, expect, it } from "vitest";
import { createDeadlines } from "./deadlines.js";

describe("deadlines", () => {
  it("gives the rollouts due, earliest first, each once, and keeps each rollout's earliest time", () => {
    const d = createDeadlines();
    d.schedule("c", 30);
    d.schedule("a", 10);
    d.schedule("b", 20);
    d.schedule("a", 25); // later: the earlier entry stands
    d.schedule("c", 5); // earlier: replaces
    expect(d.size).toBe(3);
    expect(d.takeDue(9)).toEqual(["c"]);
    expect(d.takeDue(20)).toEqual(["a", "b"]);
    expect(d.takeDue(1e9)).toEqual([]);
    expect(d.size).toBe(0);
  });

  it("schedules a rollout again once taken, and stays small as entries go stale", () => {
    const d = createDeadlines();
    d.schedule("x", 1);
    expect(d.takeDue(2)).toEqual(["x"]);
    d.schedule("x", 3);
    expect(d.takeDue(3)).toEqual(["x"]);
    for (let i = 0; i < 1000; i++) d.schedule("y", 1000 - i);
    expect(d.size).toBe(1);
    expect(d.takeDue(0)).toEqual([]);
    expect(d.takeDue(1)).toEqual(["y"]);
  });
});
