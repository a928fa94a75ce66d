/** The piscina pool: real worker threads running a TypeScript agent module, with the blocked-thread supervisor. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/agent/logger.js";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { createPoolExecutor, type PoolExecutorOptions } from "../../src/runner/pool-executor.js";
import { createRunner } from "../../src/runner/runner.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";

const agents = new URL("../fixtures/agents.ts", import.meta.url).pathname;
let h: StoreHarness;
const cleanups: (() => Promise<void>)[] = [];
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  await h.close();
});

function startPool(options: Partial<PoolExecutorOptions> & { exportName: string }) {
  const executor: AttemptExecutor = createPoolExecutor({ agentModule: agents, workers: 2, concurrency: 40, logger: silentLogger, ...options });
  const runner = createRunner({ store: h.client, executor, pollWaitSeconds: 0.3, heartbeatIntervalMs: 300, logger: silentLogger, abortGraceMs: 500 });
  const running = runner.run();
  cleanups.push(async () => {
    await runner.stop({ graceMs: 0 });
    await running;
    await executor.close();
  });
  return { executor, runner };
}

const retryOnFailure = { maxAttempts: 2, retryCondition: [AttemptStatus.FAILED] };

describe("runner pool", () => {
  it("ends a thread stuck in a synchronous loop; its attempts are retried and the other rollouts finish", async () => {
    const { executor } = startPool({ exportName: "spinner", blockedWorkerMs: 1_000 });
    const { rollouts: others } = await h.client.enqueueRollouts({
      rollouts: Array.from({ length: 50 }, () => ({ input: jsonValue({ sleepMs: 1_000 }), config: retryOnFailure })),
    });
    const { rollouts: [culprit] } = await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({ spin: true }), config: retryOnFailure }] });
    const ids = [culprit!.rolloutId, ...others.map((r) => r.rolloutId)];
    const finished = await waitFinished(h.client, ids, 60);
    expect(finished.every((r) => r.status === RolloutStatus.SUCCEEDED)).toBe(true);

    const culpritAttempts = (await h.client.queryAttempts({ rolloutId: culprit!.rolloutId })).attempts;
    expect(culpritAttempts.map((a) => a.status)).toEqual([AttemptStatus.FAILED, AttemptStatus.SUCCEEDED]);
    expect(culpritAttempts[0]?.metadata).toMatchObject({ error: { message: expect.stringMatching(/event loop was blocked for \d+ ms/) } });
    expect(executor.stats()).toMatchObject({ pool_killed: 1, pool_threads: 2 });
    // The rollouts on the other thread were never disturbed; those sharing the killed thread were retried.
    const attemptCounts = await Promise.all(others.map(async (r) => (await h.client.queryAttempts({ rolloutId: r.rolloutId })).attempts.length));
    const undisturbed = attemptCounts.filter((n) => n === 1).length;
    expect(undisturbed).toBeGreaterThanOrEqual(10);
    expect(attemptCounts.every((n) => n <= 2)).toBe(true);
  });

  it("claims nothing when the agent module cannot be loaded, and says why", async () => {
    const executor = createPoolExecutor({ agentModule: agents, exportName: "doesNotExist", workers: 1, concurrency: 2, logger: silentLogger });
    cleanups.push(() => executor.close());
    await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({}) }] });
    const runner = createRunner({ store: h.client, executor, pollWaitSeconds: 0.3, logger: silentLogger });
    await expect(runner.run()).rejects.toMatchObject({ code: "agent_load", message: expect.stringContaining('exports no agent named "doesNotExist"') });
    expect((await h.client.getStatistics({})).queueLength).toBe(1);
  });

  it("runs many I/O-bound rollouts per thread and stops a cancelled one inside its thread", async () => {
    startPool({ exportName: "sleeper", workers: 2, concurrency: 50 });
    const { rollouts } = await h.client.enqueueRollouts({
      rollouts: [{ input: jsonValue({ sleepMs: 30_000 }) }, ...Array.from({ length: 80 }, () => ({ input: jsonValue({ sleepMs: 500, reward: 0.5 }) }))],
    });
    const [long, ...short] = rollouts.map((r) => r.rolloutId);
    const started = Date.now();
    const finished = await waitFinished(h.client, short, 30);
    expect(finished.every((r) => r.status === RolloutStatus.SUCCEEDED)).toBe(true);
    // 80 rollouts of 500 ms on 2 threads run together (one after another they would take 20 s or more).
    expect(Date.now() - started).toBeLessThan(12_000);
    await h.client.updateRollout({ rolloutId: long!, status: RolloutStatus.CANCELLED });
    // The long one learns it was cancelled from its heartbeat and stops well before its 30 s.
    const deadline = Date.now() + 15_000;
    let attempt;
    do {
      await new Promise((r) => setTimeout(r, 100));
      [attempt] = (await h.client.queryAttempts({ rolloutId: long! })).attempts;
    } while (attempt?.metadata?.error === undefined && Date.now() < deadline);
    expect(attempt?.status).toBe(AttemptStatus.CANCELLED);
    expect(attempt?.metadata).toMatchObject({ error: { message: "the rollout was cancelled" } });
  });
});
