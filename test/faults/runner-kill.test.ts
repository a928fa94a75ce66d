/**
 * Fault: an `agl run` process killed with SIGKILL while two `agl serve` processes share one PostgreSQL database and
 * three runners work through them. The killed runner's attempts go silent, the watchdog (whichever server scans)
 * marks them unresponsive, the retry policy requeues their rollouts, and the surviving runners — on either server —
 * complete them. Counts are exact: rollouts, attempts per rollout, unresponsive attempts, spans.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, type Attempt, type Span } from "../../src/gen/agl/v1/types_pb.js";
import { dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";
import { type RunnerProcess, startRunnerProcess } from "../support/runner-process.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { jsonValue, waitFinished } from "../support/store-harness.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const runners: RunnerProcess[] = [];
async function startRunner(store: string, workerId: string, concurrency: number): Promise<RunnerProcess> {
  const args = ["test/fixtures/agents.ts", "--export", "stepper", "--store", store, "--worker-id", workerId];
  const runner = await startRunnerProcess([...args, "--workers", "1", "--concurrency", String(concurrency), "--poll-wait", "0.3"]);
  runners.push(runner);
  cleanups.push(async () => {
    if (runner.child.exitCode === null && runner.child.signalCode === null) runner.child.kill("SIGKILL");
    await runner.exited;
  });
  return runner;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) {
      const logs = runners.map((p) => `--- stdout\n${p.stdout()}--- stderr\n${p.stderr()}`).join("\n");
      throw new Error(`${what}: not within ${ms} ms\n${logs}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Span names, with a message span named by its text. */
const names = (spans: readonly Span[]) =>
  spans.map((s) => {
    const body = s.attributes["agentlightning.message.body"]?.value;
    return s.name === "agentlightning.message" && body?.case === "stringValue" ? body.value : s.name;
  });

describe("fault: a runner killed with SIGKILL, two store servers on PostgreSQL", () => {
  it("its attempts become unresponsive; runners on both servers complete every rollout exactly once", async () => {
    const schema = freshSchema();
    cleanups.push(() => dropSchema(schema));
    const database = `${postgresUrl()}?schema=${schema}`;
    const servers: ServerProcess[] = await Promise.all([0, 1].map(() => startServerProcess(["--database", database])));
    for (const server of servers) cleanups.push(() => server.kill());
    const [one, two] = servers.map((server) => {
      const client = createStoreClient({ baseUrl: server.url });
      cleanups.push(() => client.close());
      return client;
    }) as [StoreClient, StoreClient];

    // Runner A takes the four "hold" rollouts (its capacity): their first attempts run until stopped.
    const retry = { maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] };
    const steps = 8;
    const held = (
      await one.enqueueRollouts({
        rollouts: Array.from({ length: 4 }, () => ({
          input: jsonValue({ hold: true, steps, stepMs: 150 }),
          config: { ...retry, unresponsiveSeconds: 4 },
        })),
      })
    ).rollouts.map((r) => r.rolloutId);
    const a = await startRunner(servers[0]!.url, "runner-a", 4);
    await waitFor("runner A runs the held rollouts", async () => {
      const { rollouts } = await two.queryRollouts({ rolloutIdIn: held });
      return rollouts.every((r) => r.status === RolloutStatus.RUNNING && r.latestAttempt?.workerId === "runner-a");
    });

    // Twelve ordinary rollouts for runners B (server one) and C (server two); A has no room for them.
    const plain = (
      await two.enqueueRollouts({
        rollouts: Array.from({ length: 12 }, () => ({ input: jsonValue({ steps, stepMs: 150 }), config: retry })),
      })
    ).rollouts.map((r) => r.rolloutId);
    const all = [...held, ...plain];
    const [b, c] = await Promise.all([startRunner(servers[0]!.url, "runner-b", 3), startRunner(servers[1]!.url, "runner-c", 3)]);
    await waitFor("B and C are running rollouts", async () => {
      const { rollouts } = await one.queryRollouts({ rolloutIdIn: plain, statusIn: [RolloutStatus.RUNNING] });
      const workers = new Set(rollouts.map((r) => r.latestAttempt?.workerId));
      return workers.has("runner-b") && workers.has("runner-c");
    });

    // Mid-run: A still holds its four attempts, B and C are working.
    const before = (await one.queryRollouts({ rolloutIdIn: held })).rollouts;
    expect(before.map((r) => [r.status, r.latestAttempt?.workerId])).toEqual(held.map(() => [RolloutStatus.RUNNING, "runner-a"]));
    a.child.kill("SIGKILL");
    expect(await a.exited).toBe("SIGKILL");

    const finished = await waitFinished(two, all, 60);
    expect(finished.map((r) => r.status)).toEqual(all.map(() => RolloutStatus.SUCCEEDED));

    const attemptsOf = new Map<string, Attempt[]>();
    for (const [i, id] of all.entries()) attemptsOf.set(id, (await (i % 2 ? one : two).queryAttempts({ rolloutId: id })).attempts);
    const flat = [...attemptsOf.values()].flat();
    // Exactly A's four attempts became unresponsive; each held rollout got the one retry its policy allows.
    expect(flat.filter((x) => x.status === AttemptStatus.UNRESPONSIVE).map((x) => x.workerId)).toEqual(held.map(() => "runner-a"));
    for (const id of held) {
      const attempts = attemptsOf.get(id)!;
      expect(attempts.map((x) => [x.sequenceId, x.status])).toEqual([
        [1, AttemptStatus.UNRESPONSIVE],
        [2, AttemptStatus.SUCCEEDED],
      ]);
      expect(attempts[0]!.workerId).toBe("runner-a");
      expect(["runner-b", "runner-c"]).toContain(attempts[1]!.workerId);
    }
    for (const id of plain) {
      const attempts = attemptsOf.get(id)!;
      expect(attempts.map((x) => [x.sequenceId, x.status])).toEqual([[1, AttemptStatus.SUCCEEDED]]);
      expect(["runner-b", "runner-c"]).toContain(attempts[0]!.workerId);
    }
    expect(flat).toHaveLength(20);
    expect(flat.filter((x) => x.status === AttemptStatus.SUCCEEDED)).toHaveLength(16);
    const succeededBy = (worker: string) => flat.filter((x) => x.status === AttemptStatus.SUCCEEDED && x.workerId === worker).length;
    expect(succeededBy("runner-b")).toBeGreaterThan(0);
    expect(succeededBy("runner-c")).toBeGreaterThan(0);

    // Every succeeded attempt's spans are all there, once: its root span, `steps` messages, its reward.
    let totalSpans = 0;
    for (const id of all) {
      const { spans } = await one.querySpans({ rolloutId: id });
      totalSpans += spans.length;
      expect(new Set(spans.map((s) => s.sequenceId)).size).toBe(spans.length);
      const [succeeded] = attemptsOf.get(id)!.filter((x) => x.status === AttemptStatus.SUCCEEDED);
      const mine = spans.filter((s) => s.attemptId === succeeded!.attemptId);
      expect(names(mine).sort()).toEqual(
        [...Array.from({ length: steps }, (_, i) => `step ${i}`), "agentlightning.annotation", "agentlightning.rollout"].sort(),
      );
      // The killed attempts' spans are its heartbeats ("alive <i>"), nothing else.
      const killed = spans.filter((s) => s.attemptId !== succeeded!.attemptId);
      if (held.includes(id)) expect(killed.length).toBeGreaterThan(0);
      else expect(killed).toHaveLength(0);
      for (const name of names(killed)) expect(name).toMatch(/^alive \d+$/);
    }
    expect((await two.getStatistics({})).totalSpans).toBe(totalSpans);

    // B and C stop gracefully and account for exactly the sixteen successes.
    b.child.kill("SIGTERM");
    c.child.kill("SIGTERM");
    expect(await b.exited).toBe(0);
    expect(await c.exited).toBe(0);
    const summaries = [b, c].map((p) => JSON.parse(/agl runner finished: (\{.*\})/.exec(p.stdout())![1]!) as Record<string, number>);
    expect(summaries.reduce((n, s) => n + s.succeeded!, 0)).toBe(16);
    expect(summaries.reduce((n, s) => n + s.claimed!, 0)).toBe(16);
  }, 90_000);
});
