/** The piscina pool: real worker threads running a TypeScript agent module, with the blocked-thread supervisor. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { type Attempt, AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
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
  const executor: AttemptExecutor = createPoolExecutor({
    agentModule: agents,
    workers: 2,
    concurrency: 40,
    logger: silentLogger,
    ...options,
  });
  const runner = createRunner({
    store: h.client,
    executor,
    pollWaitSeconds: 0.3,
    heartbeatIntervalMs: 300,
    logger: silentLogger,
    abortGraceMs: 500,
  });
  const running = runner.run();
  cleanups.push(async () => {
    await runner.stop({ graceMs: 0 });
    await running;
    await executor.close();
  });
  return { executor, runner };
}

const waitUntil = async (check: () => Promise<boolean>, ms = 20_000) => {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

describe("runner pool", () => {
  it("ends a thread stuck in a synchronous loop; with the default config no other rollout is lost", async () => {
    const { executor } = startPool({ exportName: "spinner", blockedWorkerMs: 3_000 });
    const enqueue = async (inputs: object[]) =>
      (await h.client.enqueueRollouts({ rollouts: inputs.map((input) => ({ input: jsonValue(input as never) })) })).rollouts.map(
        (r) => r.rolloutId,
      );
    const attemptsOf = async (rolloutId: string) => (await h.client.queryAttempts({ rolloutId })).attempts;
    // 1: in flight on both threads when the culprit blocks one of them.
    const inFlight = await enqueue(Array.from({ length: 10 }, () => ({ sleepMs: 8_000 })));
    await waitUntil(async () => (await h.client.getStatistics({})).queueLength === 0);
    // 2: the culprit, then rollouts handed to the threads with it (those behind it on its thread never start).
    const [culprit, ...behind] = await enqueue([{ spin: true }, ...Array.from({ length: 10 }, () => ({ sleepMs: 200 }))]);
    await waitUntil(async () => (await h.client.getStatistics({})).queueLength === 0);
    // 3: claimed while the thread is blocked and not yet ended: none goes to it.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const later = await enqueue(Array.from({ length: 30 }, () => ({ sleepMs: 200 })));

    const all = [...inFlight, culprit!, ...behind, ...later];
    const finished = await waitFinished(h.client, all, 60);
    expect(finished.map((r) => r.status)).toEqual(all.map(() => RolloutStatus.SUCCEEDED));
    expect(executor.stats()).toMatchObject({ pool_killed: 1, pool_threads: 2 });

    const culpritAttempts = await attemptsOf(culprit!);
    expect(culpritAttempts.map((a) => a.status)).toEqual([AttemptStatus.UNRESPONSIVE, AttemptStatus.SUCCEEDED]);
    expect(culpritAttempts[0]?.metadata).toMatchObject({ error: { message: expect.stringMatching(/event loop was blocked for \d+ ms/) } });
    // In flight on the killed thread: an infrastructure failure, retried by default.
    const inFlightShapes = await Promise.all(inFlight.map(async (id) => (await attemptsOf(id)).map((a) => a.status)));
    expect(inFlightShapes.filter((s) => s.length === 2)).not.toHaveLength(0);
    for (const shape of inFlightShapes)
      expect([[AttemptStatus.SUCCEEDED], [AttemptStatus.UNRESPONSIVE, AttemptStatus.SUCCEEDED]]).toContainEqual(shape);
    // Queued on the killed thread, never started: handed back untouched (the attempt ended, the rollout requeued).
    const behindAttempts = await Promise.all(behind.map(attemptsOf));
    const handedBack = behindAttempts.filter((a) => a.length === 2);
    expect(handedBack).not.toHaveLength(0);
    for (const attempts of handedBack) {
      expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.CANCELLED, AttemptStatus.SUCCEEDED]);
      expect(attempts[0]?.metadata?.handed_back).toMatch(/handed back unstarted/);
    }
    // Claimed while the thread was blocked: every one ran once, on the responsive thread.
    for (const id of later) expect((await attemptsOf(id)).map((a) => a.status)).toEqual([AttemptStatus.SUCCEEDED]);
  }, 90_000);

  it("claims nothing when the agent module cannot be loaded, and says why", async () => {
    const executor = createPoolExecutor({
      agentModule: agents,
      exportName: "doesNotExist",
      workers: 1,
      concurrency: 2,
      logger: silentLogger,
    });
    cleanups.push(() => executor.close());
    await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({}) }] });
    const runner = createRunner({ store: h.client, executor, pollWaitSeconds: 0.3, logger: silentLogger });
    await expect(runner.run()).rejects.toMatchObject({
      code: "agent_load",
      message: expect.stringContaining('exports no agent named "doesNotExist"'),
    });
    expect((await h.client.getStatistics({})).queueLength).toBe(1);
  });

  it("runs many I/O-bound rollouts per thread and stops a cancelled one inside its thread", async () => {
    startPool({ exportName: "sleeper", workers: 2, concurrency: 50 });
    const { rollouts } = await h.client.enqueueRollouts({
      rollouts: [
        { input: jsonValue({ sleepMs: 30_000 }) },
        ...Array.from({ length: 80 }, () => ({ input: jsonValue({ sleepMs: 500, reward: 0.5 }) })),
      ],
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
    let attempt: Attempt | undefined;
    do {
      await new Promise((r) => setTimeout(r, 100));
      [attempt] = (await h.client.queryAttempts({ rolloutId: long! })).attempts;
    } while (attempt?.metadata?.error === undefined && Date.now() < deadline);
    expect(attempt?.status).toBe(AttemptStatus.CANCELLED);
    expect(attempt?.metadata).toMatchObject({ error: { message: "the rollout was cancelled" } });
  });
});
