/**
 * Several store servers on one PostgreSQL database: two backends (two "servers", each with its own pool and LISTEN
 * connection) on one schema, each under its own store. Claims, sequence ids, waits, resource watches and the
 * watchdog must behave as one store.
 */
import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it } from "vitest";
import { AttemptStatus, ResourceSchema, RolloutStatus, type ResourcesUpdate } from "../../src/gen/agl/v1/types_pb.js";
import type { StorageBackend } from "../../src/store/backend.js";
import { createPostgresBackend } from "../../src/store/backends/postgres/postgres-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { FakeClock, ids, json, makeSpan, sleep, timed, withTimeout } from "../conformance/harness.js";
import { adminQuery, dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

interface Server {
  store: Store;
  backend: StorageBackend;
  schema: string;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `n` stores, each over its own backend, sharing one fresh schema. */
async function servers(n: number, options: { clock?: FakeClock; poolSize?: number; scanOnCalls?: boolean } = {}): Promise<Server[]> {
  const schema = freshSchema();
  cleanups.push(() => dropSchema(schema));
  // Started together: the migration must run once even so.
  const backends = await Promise.all(
    Array.from({ length: n }, () => createPostgresBackend({ connectionString: postgresUrl(), schema, poolSize: options.poolSize ?? 4 })),
  );
  return backends.map((backend) => {
    const store = createStore({
      backend,
      watchdogIntervalSeconds: 0,
      scanDebounceSeconds: options.clock && options.scanOnCalls !== false ? 0 : 1e9,
      ...(options.clock ? { now: options.clock.now } : {}),
    });
    cleanups.push(() => store.close());
    return { store, backend, schema };
  });
}

const jsonResource = (v: number | string) => create(ResourceSchema, { kind: { case: "json", value: json({ v }) } });

/** Collects `n` updates of a watch. */
async function take(iter: AsyncIterable<ResourcesUpdate>, n: number): Promise<ResourcesUpdate[]> {
  const out: ResourcesUpdate[] = [];
  for await (const update of iter) {
    out.push(update);
    if (out.length >= n) break;
  }
  return out;
}

describe("several servers on one PostgreSQL database", () => {
  it("two servers starting together on a fresh schema migrate it once", async () => {
    const [a, b, c] = await servers(3);
    await a!.store.enqueueRollouts({ rollouts: [{}] });
    expect((await b!.store.getStatistics({})).totalRollouts).toBe(1);
    expect((await c!.store.getStatistics({})).queueLength).toBe(1);
  });

  it("200 queued rollouts dequeued concurrently through both servers are each claimed exactly once", async () => {
    const [a, b] = await servers(2, { poolSize: 6 });
    const queued = ids(
      (await a!.store.enqueueRollouts({ rollouts: Array.from({ length: 200 }, (_, i) => ({ metadata: { i } })) })).rollouts,
    );
    const claimed: string[] = [];
    // 40 callers, half on each server, each claiming up to 3 at a time until the queue is empty.
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const store = (i % 2 === 0 ? a : b)!.store;
        for (;;) {
          const { rollouts } = await store.dequeueRollouts({ workerId: `w${i}`, limit: 3 });
          if (rollouts.length === 0) return;
          claimed.push(...ids(rollouts));
        }
      }),
    );
    expect(claimed).toHaveLength(200);
    expect(new Set(claimed)).toEqual(new Set(queued));
    const stats = await b!.store.getStatistics({});
    expect(stats.queueLength).toBe(0);
    expect(stats.totalAttempts).toBe(200);
    const rows = await adminQuery<{ n: number }>(`SELECT count(*)::int AS n FROM ${a!.schema}.attempts WHERE sequence_id = 1`);
    expect(rows[0]?.n).toBe(200);
  });

  it("concurrent span batches to one rollout through both servers get unique, monotonic sequence ids", async () => {
    const [a, b] = await servers(2, { poolSize: 6 });
    const r = await a!.store.startRollout({ rollout: {}, workerId: "w" });
    const rolloutId = r.rolloutId;
    const attemptId = r.latestAttempt!.attemptId;
    const batches = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 === 0 ? a : b)!.store.addSpans({
          spans: Array.from({ length: 5 }, () => makeSpan(rolloutId, attemptId)),
        }),
      ),
    );
    const acked = batches.flatMap((batch) => batch.acks.map((ack) => ack.sequenceId));
    expect([...acked].sort((x, y) => x - y)).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    // Within a batch the ids are consecutive and increasing.
    for (const batch of batches) {
      const seq = batch.acks.map((ack) => ack.sequenceId);
      expect(seq).toEqual(seq.map((_, i) => seq[0]! + i));
    }
    const stored = await b!.store.querySpans({ rolloutId });
    expect(stored.spans.map((s) => s.sequenceId)).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    // Explicit ids from another server raise the counter for everyone.
    await a!.store.addSpans({ spans: [makeSpan(rolloutId, attemptId, { sequenceId: 1000 })] });
    expect((await b!.store.nextSpanSequenceIds({ requests: [{ rolloutId, attemptId }] })).sequenceIds).toEqual([1001]);
  });

  it("a long-poll dequeue on server B wakes when server A enqueues", async () => {
    const [a, b] = await servers(2);
    const waiting = timed(() => b!.store.dequeueRollouts({ waitSeconds: 10, workerId: "w" }));
    await sleep(200);
    const [r] = (await a!.store.enqueueRollouts({ rollouts: [{}] })).rollouts;
    const { ms, value } = await waiting;
    expect(ids(value.rollouts)).toEqual([r!.rolloutId]);
    expect(ms).toBeGreaterThanOrEqual(150);
    expect(ms).toBeLessThan(3000);
  });

  it("WaitForRollouts on server B returns when server A finishes the rollout", async () => {
    const [a, b] = await servers(2);
    const r = await a!.store.startRollout({ rollout: {}, workerId: "w" });
    const waiting = timed(() => b!.store.waitForRollouts({ rolloutIds: [r.rolloutId], timeoutSeconds: 10 }));
    await sleep(200);
    await a!.store.updateAttempt({ rolloutId: r.rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED });
    const { ms, value } = await waiting;
    expect(value.rollouts.map((x) => x.status)).toEqual([RolloutStatus.SUCCEEDED]);
    expect(ms).toBeLessThan(3000);
  });

  it("WatchResources on server B sees every version published on server A, in order, large ones too", async () => {
    const [a, b] = await servers(2);
    const ac = new AbortController();
    const watcher = take(b!.store.watchResources({ includeLatest: false }, { signal: ac.signal }), 6);
    try {
      await sleep(200);
      const big = "x".repeat(20_000); // far beyond NOTIFY's 8,000-byte payload
      const published: ResourcesUpdate[] = [];
      published.push(await a!.store.updateResources({ resourcesId: "policy", resources: { r: jsonResource(1) }, createIfMissing: true }));
      published.push(await a!.store.updateResources({ resourcesId: "policy", resources: { r: jsonResource(big) } }));
      published.push(await a!.store.updateResources({ resourcesId: "policy", resources: { r: jsonResource(3) } }));
      published.push(await a!.store.addResources({ resources: { r: jsonResource(`${big}y`) } }));
      published.push(await a!.store.updateResources({ resourcesId: "policy", resources: { r: jsonResource(5) } }));
      published.push(await b!.store.updateResources({ resourcesId: "policy", resources: { r: jsonResource(6) } }));
      const seen = await withTimeout(watcher, 10_000);
      expect(seen.map((u) => [u.resourcesId, u.version])).toEqual(published.map((u) => [u.resourcesId, u.version]));
      expect(seen).toEqual(published);
    } finally {
      ac.abort();
      await Promise.allSettled([watcher]);
    }
  });

  it("the watchdog times an attempt out exactly once while both servers scan", async () => {
    const clock = new FakeClock();
    const [a, b] = await servers(2, { clock });
    const r = await a!.store.startRollout({
      rollout: { config: { timeoutSeconds: 5, maxAttempts: 3, retryCondition: [AttemptStatus.TIMEOUT] } },
      workerId: "w",
    });
    clock.advance(10);
    let changed = 0;
    for (let round = 0; round < 10; round++) {
      // One pass per server at a time (a store's concurrent callers share its pass in flight), both at once.
      const counts = await Promise.all([a!.store.runWatchdog(), b!.store.runWatchdog()]);
      changed += counts.reduce((x, y) => x + y, 0);
    }
    expect(changed).toBe(1);
    const rollout = await b!.store.getRollout({ rolloutId: r.rolloutId });
    expect(rollout.status).toBe(RolloutStatus.REQUEUING);
    const attempts = (await a!.store.queryAttempts({ rolloutId: r.rolloutId })).attempts;
    expect(attempts.map((x) => x.status)).toEqual([AttemptStatus.TIMEOUT]);
    expect((await a!.store.getStatistics({})).queueLength).toBe(1);
    // The requeued rollout is claimed once, by whichever server asks first.
    const claims = await Promise.all([a!.store.dequeueRollouts({ limit: 5 }), b!.store.dequeueRollouts({ limit: 5 })]);
    expect(claims.flatMap((c) => ids(c.rollouts))).toEqual([r.rolloutId]);
  });

  it("an update racing a watchdog pass on the other server is never lost", async () => {
    const clock = new FakeClock();
    // Only the explicit pass scans (a store's first call scans once, before the clock moves).
    const [a, b] = await servers(2, { clock, poolSize: 6, scanOnCalls: false });
    const started = await Promise.all(
      Array.from({ length: 20 }, () => a!.store.startRollout({ rollout: { config: { timeoutSeconds: 5 } }, workerId: "w" })),
    );
    await b!.store.getRollout({ rolloutId: started[0]!.rolloutId });
    clock.advance(10);
    // Server A's watchdog times attempts out while the runners report success through server B.
    const [timedOut, outcomes] = await Promise.all([
      a!.store.runWatchdog(),
      Promise.allSettled(
        started.map((r) =>
          b!.store.updateAttempt({ rolloutId: r.rolloutId, attemptId: r.latestAttempt!.attemptId, status: AttemptStatus.SUCCEEDED }),
        ),
      ),
    ]);
    expect(outcomes.every((o) => o.status === "fulfilled")).toBe(true);
    const rollouts = (await b!.store.queryRollouts({})).rollouts;
    expect(rollouts).toHaveLength(20);
    // Either order is fine, but the acknowledged success is never overwritten: reported before the pass, it leaves
    // nothing to time out; reported after it, it lands on the timed-out attempt (the failed rollout stays failed,
    // finished rollouts being sticky).
    for (const r of rollouts) {
      expect(r.latestAttempt?.status).toBe(AttemptStatus.SUCCEEDED);
      expect([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED]).toContain(r.status);
    }
    expect(rollouts.filter((r) => r.status === RolloutStatus.FAILED)).toHaveLength(timedOut);
  });
});
