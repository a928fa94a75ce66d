/** The runner against a real store server on a socket: status transitions, resources, heartbeats, shutdown. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type Agent, rollout } from "../../src/agent/agent.js";
import { silentLogger } from "../../src/core/logger.js";
import { emitMessage } from "../../src/emitter/emitters.js";
import { AttemptStatus, RolloutStatus, TemplateEngine, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createRunner, type RunnerOptions } from "../../src/runner/runner.js";
import { fromAttributeValue } from "../../src/tracer/attributes.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";

let h: StoreHarness;
const stops: (() => Promise<void>)[] = [];
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  await h.close();
});

function startRunner(agent: Agent<never>, options: Partial<RunnerOptions> = {}) {
  const runner = createRunner({
    store: h.client,
    executor: createInProcessExecutor({ agent, concurrency: 4, logger: silentLogger }),
    pollWaitSeconds: 0.3,
    heartbeatIntervalMs: 300,
    abortGraceMs: 500,
    logger: silentLogger,
    ...options,
  });
  const running = runner.run();
  const stop = async () => {
    await runner.stop({ graceMs: 0 });
    await running;
  };
  stops.push(stop);
  return { runner, running, stop };
}

const enqueue = async (input: unknown, extra: Record<string, unknown> = {}) =>
  (await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue(input as never), ...extra }] })).rollouts[0]!.rolloutId;
const attemptsOf = async (rolloutId: string) => (await h.client.queryAttempts({ rolloutId })).attempts;
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });
const waitFor = async (check: () => Promise<boolean>, ms = 10_000) => {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await sleep(25);
  }
};

describe("runner status transitions", () => {
  it("success: the attempt and rollout succeed, with the agent's spans and reward stored once", async () => {
    startRunner(
      rollout(async (task: { n: number }) => {
        emitMessage(`working on ${task.n}`);
        return task.n / 10;
      }),
    );
    const id = await enqueue({ n: 7 });
    const [done] = await waitFinished(h.client, [id]);
    expect(done?.status).toBe(RolloutStatus.SUCCEEDED);
    const [attempt] = await attemptsOf(id);
    expect(attempt?.status).toBe(AttemptStatus.SUCCEEDED);
    const { spans } = await h.client.querySpans({ rolloutId: id });
    expect(spans.map((s) => s.name).sort()).toEqual(["agentlightning.annotation", "agentlightning.message", "agentlightning.rollout"]);
    const reward = spans.find((s) => s.name === "agentlightning.annotation");
    expect(fromAttributeValue(reward?.attributes["agentlightning.reward.0.value"])).toBe(0.7);
    expect(new Set(spans.map((s) => s.sequenceId)).size).toBe(3);
  });

  it("exception: the attempt fails with the error in its metadata, and is retried per the rollout's config", async () => {
    startRunner(
      rollout(async (_task, _r, ctx) => {
        if (ctx.attemptSequence === 1) throw new TypeError("flaky tool");
        return 1;
      }),
    );
    const once = await enqueue({});
    const retried = await enqueue({}, { config: { maxAttempts: 2, retryCondition: [AttemptStatus.FAILED] } });
    const finished = await waitFinished(h.client, [once, retried]);
    expect(finished.map((r) => r.status)).toEqual([RolloutStatus.FAILED, RolloutStatus.SUCCEEDED]);
    const [failed] = await attemptsOf(once);
    expect(failed?.status).toBe(AttemptStatus.FAILED);
    expect(failed?.metadata).toMatchObject({ error: { type: "TypeError", message: "flaky tool" } });
    expect((await attemptsOf(retried)).map((a) => a.status)).toEqual([AttemptStatus.FAILED, AttemptStatus.SUCCEEDED]);
  });

  it("timeout: the agent's signal aborts with a TimeoutError and the attempt is reported as timed out", async () => {
    let reason: unknown;
    startRunner(
      rollout(async (_task, _r, ctx) => {
        try {
          await sleep(10_000, ctx.signal);
        } catch (error) {
          reason = error;
          throw error;
        }
      }),
    );
    const started = Date.now();
    const id = await enqueue({}, { config: { timeoutSeconds: 0.4 } });
    const [done] = await waitFinished(h.client, [id]);
    expect(done?.status).toBe(RolloutStatus.FAILED);
    expect((await attemptsOf(id))[0]?.status).toBe(AttemptStatus.TIMEOUT);
    // The store ends the rollout first; the runner learns it at its next heartbeat and only then aborts the agent.
    await vi.waitFor(() => expect(reason).toBeDefined(), { timeout: 3_000 });
    expect((reason as DOMException).name).toBe("TimeoutError");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("an agent that ignores its signal is abandoned after the grace period", async () => {
    startRunner(
      rollout(() => new Promise(() => {})),
      { abortGraceMs: 200 },
    );
    const id = await enqueue({}, { config: { timeoutSeconds: 0.3 } });
    await waitFinished(h.client, [id]);
    expect((await attemptsOf(id))[0]?.status).toBe(AttemptStatus.TIMEOUT);
  });

  it("cancellation: the store's cancel reaches the agent through ctx.signal and the rollout stays cancelled", async () => {
    let aborted: unknown;
    startRunner(
      rollout(async (_task, _r, ctx) => {
        try {
          for (;;) {
            emitMessage("tick");
            await sleep(100, ctx.signal);
          }
        } catch (error) {
          aborted = error;
          throw error;
        }
      }),
      { spanFlushMs: 50 },
    );
    const id = await enqueue({});
    await waitFor(async () => (await h.client.getRollout({ rolloutId: id })).status === RolloutStatus.RUNNING);
    await h.client.updateRollout({ rolloutId: id, status: RolloutStatus.CANCELLED });
    await waitFor(async () => aborted !== undefined);
    expect((aborted as DOMException).message).toBe("the rollout was cancelled");
    await waitFor(
      async () =>
        (await h.client.getWorker({ workerId: (await h.client.queryWorkers({})).workers[0]!.workerId })).status !== WorkerStatus.BUSY,
    );
    expect((await h.client.getRollout({ rolloutId: id })).status).toBe(RolloutStatus.CANCELLED);
    expect((await attemptsOf(id))[0]?.status).toBe(AttemptStatus.CANCELLED);
  });

  it("a rollout cancelled as its agent returns: its success, sent with its last spans, is refused once; the spans land", async () => {
    const messages: string[] = [];
    const record = (message: string) => void messages.push(message);
    const logger = { debug: () => {}, info: record, warn: record, error: record };
    let calls = 0;
    startRunner(
      rollout(async (task: { n: number }, _r, ctx) => {
        calls++;
        // Cancelled after the agent's last heartbeat: the runner only learns it when it reports the attempt's end.
        if (task.n === 1) await h.client.updateRollout({ rolloutId: ctx.rolloutId, status: RolloutStatus.CANCELLED });
        return 0.5;
      }),
      { logger },
    );
    const cancelled = await enqueue({ n: 1 });
    const [done] = await waitFinished(h.client, [cancelled]);
    expect(done?.status).toBe(RolloutStatus.CANCELLED);
    // The runner goes on with the next rollout.
    const next = await enqueue({ n: 2 });
    expect((await waitFinished(h.client, [next]))[0]?.status).toBe(RolloutStatus.SUCCEEDED);
    expect((await attemptsOf(cancelled)).map((a) => a.status)).toEqual([AttemptStatus.CANCELLED]);
    // The agent's reward still landed: the last spans rode on the final update, whose status the store refused, and
    // went again with the update reporting no status.
    const { spans } = await h.client.querySpans({ rolloutId: cancelled });
    expect(spans.map((s) => s.name)).toContain("agentlightning.annotation");
    expect(messages.filter((m) => m.includes(cancelled) && m.includes("stays cancelled"))).toHaveLength(1);
    expect(messages.filter((m) => m.includes("could not report"))).toEqual([]);
    expect(calls).toBe(2);
  });
});

describe("runner resources, heartbeats and shutdown", () => {
  it("resolves the rollout's resources: a proxy LLM bound to the attempt, a prompt template, JSON", async () => {
    const seen: unknown[] = [];
    startRunner(
      rollout(async (task: { q: string }, resources, ctx) => {
        const llm = resources.llm();
        seen.push({
          endpoint: llm.endpoint,
          model: llm.model,
          prompt: resources.promptTemplate().format(task),
          limits: resources.json("limits"),
          ids: [ctx.rolloutId, ctx.attemptId],
        });
        return 1;
      }),
    );
    const published = await h.client.addResources({
      resources: {
        policy: { kind: { case: "proxyLlm", value: { endpoint: "http://127.0.0.1:9/v1", model: "policy-v3" } } },
        prompt: { kind: { case: "promptTemplate", value: { template: "Q: {{ q }}", engine: TemplateEngine.JINJA } } },
        limits: { kind: { case: "json", value: jsonValue({ maxTurns: 3 }) } },
      },
    });
    const id = await enqueue({ q: "2+2" });
    await waitFinished(h.client, [id]);
    const attemptId = (await attemptsOf(id))[0]?.attemptId;
    expect(seen).toEqual([
      {
        endpoint: `http://127.0.0.1:9/rollout/${id}/attempt/${attemptId}/v1`,
        model: "policy-v3",
        prompt: "Q: 2+2",
        limits: { maxTurns: 3 },
        ids: [id, attemptId],
      },
    ]);
    expect((await h.client.getRollout({ rolloutId: id })).resourcesId).toBe(published.resourcesId);
  });

  it("spans dropped under backpressure are counted in the attempt's metadata", async () => {
    startRunner(
      rollout(() => {
        for (let i = 0; i < 100; i++) emitMessage(`m${i}`);
        return 1;
      }),
      { spanBatchSize: 64, shipper: { maxQueued: 10 } },
    );
    const id = await enqueue({});
    await waitFinished(h.client, [id]);
    const [attempt] = await attemptsOf(id);
    expect(attempt?.status).toBe(AttemptStatus.SUCCEEDED);
    expect(attempt?.metadata).toEqual({ spans_dropped: 54 });
    const { spans } = await h.client.querySpans({ rolloutId: id });
    // 10 queued of the first batch of 64, then the last 36 messages, the reward and the root in the final update.
    expect(spans).toHaveLength(10 + 36 + 2);
  });

  it("a silent agent stays alive through attempt heartbeats; the worker reports its stats", async () => {
    const { runner } = startRunner(
      rollout(async () => {
        await sleep(2_500);
        return 1;
      }),
      { heartbeatIntervalMs: 200, workerHeartbeatMs: 200 },
    );
    const id = await enqueue({}, { config: { unresponsiveSeconds: 1, maxAttempts: 1 } });
    const [done] = await waitFinished(h.client, [id]);
    expect(done?.status).toBe(RolloutStatus.SUCCEEDED);
    const [attempt] = await attemptsOf(id);
    expect(attempt?.status).toBe(AttemptStatus.SUCCEEDED);
    expect(attempt?.lastHeartbeatTime).toBeGreaterThan(attempt!.startTime + 1.2);
    const worker = await h.client.getWorker({ workerId: runner.workerId });
    expect(worker.heartbeatStats).toMatchObject({ succeeded: expect.any(Number), rss_mb: expect.any(Number) });
    expect(worker.lastHeartbeatTime).toBeDefined();
  });

  it("the worker's stats are current once its work ends and once it stops, between periodic heartbeats", async () => {
    // Periodic worker heartbeats a minute apart: only the ones sent when the work runs out can bring the store news.
    const { runner, stop } = startRunner(
      rollout(async () => {
        await sleep(100);
        return 1;
      }),
      { heartbeatIntervalMs: 60_000 },
    );
    const statsOf = async () => (await h.client.getWorker({ workerId: runner.workerId })).heartbeatStats;
    const ids = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => enqueue({ n })));
    await waitFinished(h.client, ids);
    await vi.waitFor(async () => expect(await statsOf()).toMatchObject({ active: 0, running: 0, claimed: 6, succeeded: 6 }), {
      timeout: 3_000,
    });
    await stop();
    expect(await statsOf()).toMatchObject({ active: 0, running: 0, claimed: 6, succeeded: 6, finished: 6 });
  });

  it("graceful shutdown lets short attempts finish and hands long ones back to the queue for another runner", async () => {
    const first = startRunner(
      rollout(async (task: { ms: number }, _r, ctx) => {
        await sleep(task.ms, ctx.signal);
        return 1;
      }),
    );
    const short = await enqueue({ ms: 200 });
    const long = await enqueue({ ms: 60_000 });
    await waitFor(async () => (await h.client.getStatistics({})).queueLength === 0);
    await first.runner.stop({ graceMs: 600 });
    const summary = await first.running;
    expect(summary).toMatchObject({ succeeded: 1, interrupted: 1 });
    expect((await h.client.getRollout({ rolloutId: short })).status).toBe(RolloutStatus.SUCCEEDED);
    expect((await h.client.getRollout({ rolloutId: long })).status).toBe(RolloutStatus.REQUEUING);
    expect((await attemptsOf(long))[0]?.metadata).toMatchObject({ handed_back: expect.any(String) });
    startRunner(
      rollout(() => 1),
      { workerId: "second-runner" },
    );
    const [done] = await waitFinished(h.client, [long]);
    expect(done?.status).toBe(RolloutStatus.SUCCEEDED);
    const attempts = await attemptsOf(long);
    expect(attempts.map((a) => a.workerId)).toEqual([first.runner.workerId, "second-runner"]);
  });
});
