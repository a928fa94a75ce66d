import { describe, expect, test } from "vitest";
import { budgetWarning, createBudgetTracker, createPromptTokenEstimator, roundCost } from "./budget.js";

describe("roundCost", () => {
  test("matches the reference example: B=2, F=2, G=4, V=10, N=29 costs 95 then 105 rollouts and 8 calls", () => {
    const shape = { beamWidth: 2, branchFactor: 2, gradientBatch: 4, valBatch: 10, valSize: 29 };
    expect(roundCost(shape, 1)).toEqual({ optimizerCalls: 8, rollouts: 95 });
    expect(roundCost(shape, 2)).toEqual({ optimizerCalls: 8, rollouts: 105 });
  });
});

describe("budgetWarning", () => {
  const shape = { beamWidth: 2, branchFactor: 2, gradientBatch: 4, valBatch: 10, valSize: 29 };
  test("says nothing when the baseline and a round fit", () => {
    expect(budgetWarning({ rollouts: 124, optimizerCalls: 8 }, shape, true)).toBeUndefined();
    expect(budgetWarning({}, shape, true)).toBeUndefined();
  });
  test("names what is short and the formula", () => {
    const text = budgetWarning({ rollouts: 123, optimizerCalls: 7 }, shape, true) as string;
    expect(text).toContain("cannot complete one round");
    expect(text).toContain("124 rollouts (budget 123)");
    expect(text).toContain("8 optimizer calls (budget 7)");
    expect(text).toContain("B·F·G + (b + B·F)·V + N");
  });
});

describe("createBudgetTracker", () => {
  test("fits and spend", () => {
    const budget = createBudgetTracker({ rollouts: 10 });
    expect(budget.fits({ rollouts: 10, optimizerCalls: 1_000 })).toBe(true);
    budget.spend({ rollouts: 4 });
    expect(budget.fits({ rollouts: 7 })).toBe(false);
    expect(budget.used).toEqual({ rollouts: 4, optimizerCalls: 0, tokens: 0 });
  });

  test("token reservations: a call that cannot get its share waits for another to settle", async () => {
    const budget = createBudgetTracker({ tokens: 1_000 });
    expect(await budget.reserveTokens(600, 100)).toBe(600);
    let second: number | undefined;
    const pending = budget.reserveTokens(600, 100).then((n) => (second = n));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(second).toBeUndefined();
    budget.spend({ tokens: 300 });
    budget.releaseTokens(600);
    await pending;
    expect(second).toBe(600);
    budget.releaseTokens(600);
    budget.spend({ tokens: 650 });
    expect(await budget.reserveTokens(600, 100)).toBe(0);
    expect(budget.tokensLeft()).toBe(50);
  });

  test("with nothing in flight, a call gets what is left", async () => {
    const budget = createBudgetTracker({ tokens: 300 });
    expect(await budget.reserveTokens(600, 100)).toBe(300);
  });
});

describe("createPromptTokenEstimator", () => {
  test("assumes a token per character until usage is seen, then the worst ratio seen + 10 %", () => {
    const estimator = createPromptTokenEstimator();
    expect(estimator.estimate(400)).toBe(464);
    estimator.observe(400, 100);
    expect(estimator.estimate(400)).toBe(110);
    estimator.observe(100, 50);
    expect(estimator.estimate(400)).toBe(220);
  });
});
