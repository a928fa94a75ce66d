import { afterAll, beforeAll, expect, test } from "vitest";
import { runApo } from "../../src/algorithm/apo/apo.js";
import { type ApoHarness, hintTasks, startApoHarness } from "./apo-harness.js";
import { maxOverlap } from "./store-reads.js";

let h: ApoHarness;
beforeAll(async () => {
  // The runner pool: two piscina worker threads loading the agent module, four rollouts each at once.
  h = await startApoHarness({ executor: "pool", workers: 2, concurrency: 4, agentLatencyMs: 150 });
  // Warm the worker threads up (they load the agent module on their first task).
  await runApo({ ...h.base(), runId: "warm", templates: { prompt: "{q}" }, train: hintTasks(1), val: hintTasks(8), rounds: 0 });
});
afterAll(() => h.close());

test("candidates are evaluated in parallel through the runner pool", async () => {
  const started = performance.now();
  const report = await runApo({
    ...h.base(),
    runId: "par",
    templates: { prompt: "Answer this: {q}" },
    train: hintTasks(12),
    val: hintTasks(9, 100),
    beamWidth: 2,
    branchFactor: 2,
    rounds: 1,
    gradientBatchSize: 3,
    valBatchSize: 4,
  });
  const seconds = (performance.now() - started) / 1000;
  const { rollouts } = await h.store.client.queryRollouts({});
  const mine = rollouts.filter((r) => r.metadata?.apo_run === "par");
  expect(mine).toHaveLength(report.budget.used.rollouts);
  // Each rollout waits 150 ms on the LLM: one at a time, they alone would take longer than the whole run did.
  expect(seconds).toBeLessThan(mine.length * 0.15);
  expect(maxOverlap(mine)).toBeGreaterThanOrEqual(4);
  // The validation batches of all candidates of a round were in flight together.
  const scoring = mine.filter((r) => String(r.groupId).startsWith("apo:par:r1:val:"));
  expect(new Set(scoring.map((r) => r.groupId)).size).toBeGreaterThan(1);
  expect(maxOverlap(scoring)).toBeGreaterThan(4);
  expect(report.best.score).toBeGreaterThan(0);
}, 60_000);
