/** Concurrent callers (reference §10.1 "Concurrency"): every call is atomic. */
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { enqueueN, ids, json, makeSpan, openStore, startRollout } from "./harness.js";

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe.each(backends)("concurrency [$name]", (def) => {
  it("50 concurrent enqueues create 50 distinct rollouts", async () => {
    const { store } = await openStore(def);
    const results = await Promise.all(range(50).map((i) => store.enqueueRollouts({ rollouts: [{ input: json({ i }) }] })));
    const created = results.flatMap((r) => ids(r.rollouts));
    expect(new Set(created).size).toBe(50);
    const stored = await store.queryRollouts({});
    expect(stored.page?.total).toBe(50);
    expect(new Set(ids(stored.rollouts))).toEqual(new Set(created));
    expect((await store.getStatistics({})).queueLength).toBe(50);
  });

  it("30 concurrent dequeues over 20 queued claim each exactly once", async () => {
    const { store } = await openStore(def);
    const queued = ids(await enqueueN(store, 20));
    const results = await Promise.all(range(30).map((i) => store.dequeueRollouts({ workerId: `w${i}` })));
    const claimed = results.flatMap((r) => ids(r.rollouts));
    expect(claimed).toHaveLength(20);
    expect(new Set(claimed)).toEqual(new Set(queued));
    expect(results.filter((r) => r.rollouts.length === 0)).toHaveLength(10);
    for (const id of queued) {
      const attempts = (await store.queryAttempts({ rolloutId: id })).attempts;
      expect(attempts.map((a) => a.sequenceId)).toEqual([1]);
    }
    expect((await store.getStatistics({})).totalAttempts).toBe(20);
  });

  it("concurrent batch dequeues never claim a rollout twice", async () => {
    const { store } = await openStore(def);
    const queued = ids(await enqueueN(store, 25));
    const results = await Promise.all(range(10).map(() => store.dequeueRollouts({ limit: 4 })));
    const claimed = results.flatMap((r) => ids(r.rollouts));
    expect(claimed).toHaveLength(25);
    expect(new Set(claimed)).toEqual(new Set(queued));
  });

  it("30 concurrent sequence id allocations are exactly 1..30", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const results = await Promise.all(range(30).map(() => store.nextSpanSequenceIds({ requests: [{ rolloutId, attemptId }] })));
    expect(results.map((r) => r.sequenceIds[0]).sort((a, b) => a! - b!)).toEqual(range(30));
  });

  it("30 concurrent single-span batches get sequence ids exactly 1..30", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const results = await Promise.all(range(30).map(() => store.addSpans({ spans: [makeSpan(rolloutId, attemptId)] })));
    expect(results.map((r) => r.acks[0]!.sequenceId).sort((a, b) => a - b)).toEqual(range(30));
    const stored = await store.querySpans({ rolloutId });
    expect(stored.spans.map((s) => s.sequenceId)).toEqual(range(30));
  });

  it("concurrent retries of the same span store it once", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const span = makeSpan(rolloutId, attemptId);
    const results = await Promise.all(range(10).map(() => store.addSpans({ spans: [span] })));
    const acks = results.map((r) => r.acks[0]!);
    expect(acks.filter((a) => !a.duplicate)).toHaveLength(1);
    expect(new Set(acks.map((a) => a.sequenceId)).size).toBe(1);
    expect((await store.querySpans({ rolloutId })).page?.total).toBe(1);
  });

  it("50 concurrent UpdateResources of new ids are all stored", async () => {
    const { store } = await openStore(def);
    const results = await Promise.all(
      range(50).map((i) => store.updateResources({ resourcesId: `v${i}`, resources: {}, createIfMissing: true })),
    );
    expect(results.every((r) => r.version === 1)).toBe(true);
    expect((await store.queryResources({})).page?.total).toBe(50);
    const latest = (await store.getLatestResources({})).resources;
    expect(latest?.resourcesId).toMatch(/^v\d+$/);
  });

  it("concurrent updates of one snapshot get distinct consecutive versions", async () => {
    const { store } = await openStore(def);
    const base = await store.addResources({ resources: {} });
    const results = await Promise.all(range(20).map(() => store.updateResources({ resourcesId: base.resourcesId, resources: {} })));
    expect(results.map((r) => r.version).sort((a, b) => a - b)).toEqual(range(20).map((v) => v + 1));
    expect((await store.getResources({ resourcesId: base.resourcesId })).version).toBe(21);
    expect((await store.getLatestResources({})).resources?.version).toBe(21);
  });

  it("concurrent StartAttempt calls number attempts uniquely", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    const results = await Promise.all(range(10).map(() => store.startAttempt({ rolloutId })));
    expect(results.map((r) => r.latestAttempt!.sequenceId).sort((a, b) => a - b)).toEqual(range(10).map((i) => i + 1));
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.sequenceId).toBe(11);
  });

  it("a concurrent failure and requeue cycle keeps one queue entry per rollout", async () => {
    const { store } = await openStore(def);
    const rs = await enqueueN(store, 10, { config: { maxAttempts: 3, retryCondition: [AttemptStatus.FAILED] } });
    const claimed = (await store.dequeueRollouts({ limit: 10 })).rollouts;
    await Promise.all(
      claimed.map((r) =>
        store.updateAttempt({
          rolloutId: r.rolloutId,
          attemptId: r.latestAttempt!.attemptId,
          status: AttemptStatus.FAILED,
        }),
      ),
    );
    expect((await store.getStatistics({})).queueLength).toBe(10);
    const again = await Promise.all(range(15).map(() => store.dequeueRollouts({})));
    const reclaimed = again.flatMap((r) => ids(r.rollouts));
    expect(new Set(reclaimed)).toEqual(new Set(ids(rs)));
    expect(reclaimed).toHaveLength(10);
    const statuses = (await store.queryRollouts({})).rollouts.map((r) => r.status);
    expect(statuses.every((s) => s === RolloutStatus.PREPARING)).toBe(true);
  });
});
