/** Trainer.dev and the Baseline algorithm: an agent module on worker threads, an agent object on this thread. */
import { describe, expect, it } from "vitest";
import { rollout } from "../../src/agent/agent.js";
import { silentLogger } from "../../src/core/logger.js";
import { createBaseline } from "../../src/algorithm/baseline.js";
import { emitReward } from "../../src/emitter/reward.js";
import { Trainer } from "../../src/trainer/trainer.js";

describe("Trainer.dev", () => {
  it("runs an agent module on worker threads over train and val sets and reports each rollout", async () => {
    const agent = new URL("../fixtures/agents.ts", import.meta.url);
    // The fixture's default export is a class agent: training rollouts earn 1, validation rollouts 0.
    const report = await Trainer.dev(agent, { train: [{ a: 1 }, { a: 2 }], val: [{ a: 3 }] }, { logger: silentLogger, workers: 2 });
    expect(report.rollouts.map((r) => [r.mode, r.status, r.reward, r.attempts])).toEqual([
      ["train", "succeeded", 1, 1],
      ["train", "succeeded", 1, 1],
      ["val", "succeeded", 0, 1],
    ]);
    expect(report.meanReward).toEqual({ train: 1, val: 0 });
    expect(report.statuses).toEqual({ succeeded: 3 });
  });

  it("runs an agent object on this thread; Baseline throttles the queue and repeats epochs", async () => {
    let running = 0;
    let most = 0;
    const agent = rollout(async (task: { x: number }) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      if (task.x < 0) throw new Error("negative");
      emitReward(task.x / 10, { feedback: `x was ${task.x}` });
    });
    const report = await Trainer.dev(agent, [{ x: 1 }, { x: 3 }, { x: -1 }, { x: 5 }], {
      logger: silentLogger,
      concurrency: 2,
      algorithm: createBaseline({ epochs: 2, maxQueued: 1 }),
    });
    expect(report.rollouts).toHaveLength(8);
    expect(report.rollouts.map((r) => r.reward)).toEqual([0.1, 0.3, undefined, 0.5, 0.1, 0.3, undefined, 0.5]);
    expect(report.statuses).toEqual({ succeeded: 6, failed: 2 });
    expect(report.meanReward.train).toBeCloseTo(0.3);
    expect(most).toBeLessThanOrEqual(2);
  });
});
