/**
 * Real `agl serve --database postgres://…` processes sharing one database: each serves its own clients, and when one
 * is killed (-9) mid-run its clients fail over to the other without losing anything acknowledged.
 */
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, type Rollout, type Span } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `n` servers on one fresh schema, and a client of each. */
async function startServers(n: number): Promise<Array<{ server: ServerProcess; client: StoreClient }>> {
  const schema = freshSchema();
  cleanups.push(() => dropSchema(schema));
  const database = `${postgresUrl()}?schema=${schema}`;
  const started = await Promise.all(Array.from({ length: n }, () => startServerProcess(["--database", database])));
  return started.map((server) => {
    cleanups.push(() => server.kill());
    const client = createStoreClient({ baseUrl: server.url, maxTries: 1, timeoutMs: 10_000 });
    cleanups.push(() => client.close());
    return { server, client };
  });
}

type SpanInit = Pick<Span, "rolloutId" | "attemptId" | "spanId" | "name">;
const spansFor = (r: Rollout, n: number): SpanInit[] =>
  Array.from({ length: n }, () => ({
    rolloutId: r.rolloutId,
    attemptId: r.latestAttempt!.attemptId,
    spanId: randomBytes(8).toString("hex"),
    name: "step",
  }));

const isUnavailable = (error: unknown) => error instanceof ConnectError && error.code === Code.Unavailable;

describe("agl serve processes on one PostgreSQL database", () => {
  it("serve one client each as one store: claims, spans, waits and resource versions", async () => {
    const [a, b] = await startServers(2);
    const enqueued = (await a!.client.enqueueRollouts({ rollouts: Array.from({ length: 24 }, (_, i) => ({ metadata: { i } })) })).rollouts;
    const wanted = enqueued.map((r) => r.rolloutId);
    // The algorithm waits through B while runners on both servers do the work.
    const waiting = b!.client.waitForRollouts({ rolloutIds: wanted, timeoutSeconds: 30 });
    const watch = new AbortController();
    const versions: number[] = [];
    const watcher = (async () => {
      for await (const update of b!.client.watchResources({ includeLatest: false }, { signal: watch.signal })) {
        versions.push(update.version);
        if (versions.length === 3) return;
      }
    })();
    const claimedBy = new Map<string, string>();
    const acked = new Set<string>();
    await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const client = (i % 2 === 0 ? a : b)!.client;
        for (;;) {
          const { rollouts } = await client.dequeueRollouts({ workerId: `runner-${i}`, limit: 2, waitSeconds: 0.5 });
          if (rollouts.length === 0) return;
          for (const r of rollouts) {
            expect(claimedBy.has(r.rolloutId)).toBe(false);
            claimedBy.set(r.rolloutId, `runner-${i}`);
            const { acks } = await client.addSpans({ spans: spansFor(r, 3) });
            for (const ack of acks) acked.add(`${ack.rolloutId}/${ack.spanId}`);
            await client.updateAttempt({ rolloutId: r.rolloutId, attemptId: r.latestAttempt!.attemptId, status: AttemptStatus.SUCCEEDED });
          }
        }
      }),
    );
    expect(claimedBy.size).toBe(24);
    const finished = await waiting;
    expect(new Set(finished.rollouts.map((r) => r.rolloutId))).toEqual(new Set(wanted));
    expect(finished.rollouts.every((r) => r.status === RolloutStatus.SUCCEEDED)).toBe(true);

    await new Promise((resolve) => setTimeout(resolve, 200));
    await a!.client.updateResources({ resourcesId: "policy", resources: {}, createIfMissing: true });
    await a!.client.updateResources({ resourcesId: "policy", resources: {} });
    await b!.client.updateResources({ resourcesId: "policy", resources: {} });
    await watcher;
    watch.abort();
    expect(versions).toEqual([1, 2, 3]);

    const stored = new Set<string>();
    for (const id of wanted) {
      for (const span of (await a!.client.querySpans({ rolloutId: id })).spans) stored.add(`${span.rolloutId}/${span.spanId}`);
      expect((await b!.client.queryAttempts({ rolloutId: id })).attempts).toHaveLength(1);
    }
    expect(stored).toEqual(acked);
    const stats = await b!.client.getStatistics({});
    expect(stats.backend).toBe("postgres");
    expect(stats.totalSpans).toBe(72);
  });

  it("kill -9 of one server mid-run: its clients fail over to the other and nothing acknowledged is lost", async () => {
    const [a, b] = await startServers(2);
    const total = 40;
    // A claim in flight when A dies may commit without its runner hearing of it: the watchdog (on B) then marks
    // that attempt unresponsive and the retry policy hands the rollout to another runner.
    const config = { unresponsiveSeconds: 4, maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] };
    const enqueued = (await b!.client.enqueueRollouts({ rollouts: Array.from({ length: total }, () => ({ config })) })).rollouts;
    const acked = new Set<string>();
    const succeeded = new Set<string>();
    let failovers = 0;

    /** A runner speaking to A until A fails, then to B; every call that failed is repeated on B. */
    async function runner(index: number) {
      let client = (index % 2 === 0 ? a : b)!.client;
      const call = async <T>(fn: (c: StoreClient) => Promise<T>): Promise<T> => {
        try {
          return await fn(client);
        } catch (error) {
          if (!isUnavailable(error) || client === b!.client) throw error;
          failovers++;
          client = b!.client;
          return fn(client);
        }
      };
      for (;;) {
        const { rollouts } = await call((c) => c.dequeueRollouts({ workerId: `runner-${index}`, limit: 1, waitSeconds: 0.5 }));
        if (rollouts.length === 0) {
          if (succeeded.size >= total) return;
          continue;
        }
        const [r] = rollouts;
        for (let batch = 0; batch < 4; batch++) {
          const spans = spansFor(r!, 5);
          const { acks } = await call((c) => c.addSpans({ spans }));
          for (const ack of acks) acked.add(`${ack.rolloutId}/${ack.spanId}`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await call((c) =>
          c.updateAttempt({ rolloutId: r!.rolloutId, attemptId: r!.latestAttempt!.attemptId, status: AttemptStatus.SUCCEEDED }),
        );
        succeeded.add(r!.rolloutId);
      }
    }

    const running = Promise.all(Array.from({ length: 8 }, (_, i) => runner(i)));
    await new Promise((resolve) => setTimeout(resolve, 600));
    await a!.server.kill();
    await running;
    expect(failovers).toBeGreaterThan(0);
    expect(succeeded.size).toBe(total);

    const stored: string[] = [];
    for (const r of enqueued) {
      const rollout = await b!.client.getRollout({ rolloutId: r.rolloutId });
      expect(rollout.status).toBe(RolloutStatus.SUCCEEDED);
      const attempts = (await b!.client.queryAttempts({ rolloutId: r.rolloutId })).attempts;
      // At most the one retry the policy allows (for a rollout whose first claim was orphaned by the kill).
      expect(attempts.length).toBeLessThanOrEqual(config.maxAttempts);
      for (const span of (await b!.client.querySpans({ rolloutId: r.rolloutId })).spans) stored.push(`${span.rolloutId}/${span.spanId}`);
    }
    expect(new Set(stored).size).toBe(stored.length);
    // Every acknowledged span is stored; spans of an orphaned first attempt were never sent, so none is extra.
    expect(new Set(stored)).toEqual(acked);
  });
});
