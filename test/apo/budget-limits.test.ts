import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ApoEvent } from "../../src/algorithm/apo/apo-events.js";
import type { ApoOptions } from "../../src/algorithm/apo/apo-options.js";
import { runApo } from "../../src/algorithm/apo/apo.js";
import { type ApoHarness, hintTasks, startApoHarness } from "./apo-harness.js";

let h: ApoHarness;
beforeAll(async () => {
  h = await startApoHarness();
});
afterAll(() => h.close());

// B=2 F=2 G=3 V=4 N=9: the baseline costs 9 rollouts; round 1 at most 2·2·3 + (1 + 4)·4 + 9 = 41 rollouts and 8
// calls; round 2 at most 12 + (2 + 4)·4 + 9 = 45 rollouts and 8 calls.
const search = (runId: string, extra: Partial<ApoOptions>): ApoOptions => ({
  ...h.base(),
  runId,
  templates: { prompt: "Answer this: {q}" },
  train: hintTasks(12),
  val: hintTasks(9, 100),
  beamWidth: 2,
  branchFactor: 2,
  rounds: 3,
  gradientBatchSize: 3,
  valBatchSize: 4,
  ...extra,
});

const rolloutsOf = async (runId: string) => {
  const { rollouts } = await h.store.client.queryRollouts({});
  return rollouts.filter((r) => r.metadata?.apo_run === runId).length;
};

describe("budget", { timeout: 60_000 }, () => {
  test("a budget too small for one round is announced up front, and never exceeded", async () => {
    const events: ApoEvent[] = [];
    const report = await runApo(search("small", { budget: { rollouts: 30 }, onEvent: (e) => events.push(e) }));
    const warning = events.findIndex((e) => e.type === "warning");
    expect(warning).toBe(1); // right after "start", before any rollout
    const message = (events[warning] as { message: string }).message;
    expect(message).toContain("cannot complete one round");
    expect(message).toContain("50 rollouts (budget 30)");
    expect(report.warnings).toContain(message);
    expect(report.status).toBe("budget_exhausted");
    expect(report.stopReason).toMatch(/round 1 may need 41 rollouts/);
    expect(report.rounds).toHaveLength(0);
    expect(report.budget.used.rollouts).toBe(9);
    expect(await rolloutsOf("small")).toBe(9);
    // The seed, measured by the baseline, is still published as the best.
    expect((await h.store.client.getLatestResources({})).resources?.resourcesId).toBe("apo-small-best");
  });

  test("the rollout budget stops the search before a round that may not fit", async () => {
    const report = await runApo(search("rollouts", { budget: { rollouts: 50 } }));
    expect(report.warnings).toEqual([]);
    expect(report.rounds).toHaveLength(1);
    expect(report.status).toBe("budget_exhausted");
    expect(report.budget.used.rollouts).toBeLessThanOrEqual(50);
    expect(await rolloutsOf("rollouts")).toBe(report.budget.used.rollouts);
  });

  test("the optimizer-call budget is never exceeded", async () => {
    const before = h.optimizer.requests.length;
    const report = await runApo(search("calls", { budget: { optimizerCalls: 12 } }));
    expect(report.rounds).toHaveLength(1);
    expect(report.budget.used.optimizerCalls).toBe(8);
    expect(h.optimizer.requests.length - before).toBe(8);
    expect(report.stopReason).toMatch(/optimizer calls/);
  });

  test("the token budget caps every answer and is never exceeded", async () => {
    const before = h.optimizer.answers.length;
    const report = await runApo(search("tokens", { budget: { tokens: 5_000 }, rounds: 3 }));
    const answers = h.optimizer.answers.slice(before);
    const served = answers.reduce((n, a) => n + a.promptIds.length + a.responseIds.length, 0);
    expect(report.budget.used.tokens).toBe(served);
    expect(served).toBeLessThanOrEqual(5_000);
    expect(report.status).toBe("budget_exhausted");
    expect(report.stopReason).toMatch(/token budget/);
    const requests = h.optimizer.requests.slice(-answers.length);
    expect(requests.every((r) => typeof r.body.max_completion_tokens === "number")).toBe(true);
  });
});
