/**
 * Load: 1,000 concurrent simulated runners across two `agl serve` processes on one PostgreSQL database. Afterwards
 * every rollout is finished exactly once and the stored spans are exactly the acknowledged ones.
 */
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

const RUNNERS = 1_000;
const ROLLOUTS = 2_000;
const SPANS_PER_BATCH = 3;

const servers: ServerProcess[] = [];
const clients: StoreClient[] = [];
let schema = "";

afterAll(async () => {
  for (const client of clients) client.close();
  await Promise.all(servers.map((server) => server.kill()));
  if (schema) await dropSchema(schema);
});

describe("load", () => {
  it(`${RUNNERS} concurrent runners on two servers finish ${ROLLOUTS} rollouts exactly once, losing no span`, async () => {
    schema = freshSchema();
    const database = `${postgresUrl()}?schema=${schema}`;
    servers.push(...(await Promise.all([startServerProcess(["--database", database]), startServerProcess(["--database", database])])));
    clients.push(...servers.map((server) => createStoreClient({ baseUrl: server.url, timeoutMs: 60_000 })));
    const [a, b] = clients as [StoreClient, StoreClient];

    const ids: string[] = [];
    for (let i = 0; i < ROLLOUTS; i += 500) {
      const { rollouts } = await a.enqueueRollouts({ rollouts: Array.from({ length: 500 }, (_, j) => ({ metadata: { i: i + j } })) });
      ids.push(...rollouts.map((r) => r.rolloutId));
    }

    const finishedBy = new Map<string, number>();
    const acked = new Map<string, number>();
    let done = 0;
    const spans = (rolloutId: string, attemptId: string) =>
      Array.from({ length: SPANS_PER_BATCH }, () => ({ rolloutId, attemptId, spanId: randomBytes(8).toString("hex"), name: "llm" }));

    async function runner(index: number) {
      const client = index % 2 === 0 ? a : b;
      const workerId = `runner-${index}`;
      while (done < ROLLOUTS) {
        const { rollouts } = await client.dequeueRollouts({ workerId, waitSeconds: 1 });
        for (const r of rollouts) {
          const attemptId = r.latestAttempt!.attemptId;
          const first = await client.addSpans({ spans: spans(r.rolloutId, attemptId) });
          const last = spans(r.rolloutId, attemptId);
          await client.updateAttempt({ rolloutId: r.rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans: last });
          acked.set(r.rolloutId, (acked.get(r.rolloutId) ?? 0) + first.acks.filter((ack) => !ack.duplicate).length + last.length);
          finishedBy.set(r.rolloutId, (finishedBy.get(r.rolloutId) ?? 0) + 1);
          done++;
        }
      }
    }
    await Promise.all(Array.from({ length: RUNNERS }, (_, i) => runner(i)));

    expect(done).toBe(ROLLOUTS);
    expect(finishedBy.size).toBe(ROLLOUTS);
    expect([...finishedBy.values()].every((n) => n === 1)).toBe(true);

    const stats = await b.getStatistics({});
    expect(stats.rolloutsByStatus).toEqual({ ROLLOUT_STATUS_SUCCEEDED: ROLLOUTS });
    expect(stats.totalAttempts).toBe(ROLLOUTS);
    expect(stats.queueLength).toBe(0);
    expect(stats.totalSpans).toBe(ROLLOUTS * 2 * SPANS_PER_BATCH);
    expect(stats.totalWorkers).toBe(RUNNERS);
    // Per rollout, through the other server: the spans stored are the ones acknowledged, numbered 1..n.
    for (const id of ids.filter((_, i) => i % 50 === 0)) {
      const { spans: stored } = await a.querySpans({ rolloutId: id });
      expect(stored.length).toBe(acked.get(id));
      expect(stored.map((s) => s.sequenceId)).toEqual(stored.map((_, i) => i + 1));
      const rollout = await b.getRollout({ rolloutId: id });
      expect(rollout.status).toBe(RolloutStatus.SUCCEEDED);
    }
    const { workers } = await a.queryWorkers({ statusIn: [WorkerStatus.BUSY] });
    expect(workers).toEqual([]);
  }, 180_000);
});
