/**
 * One test per deliberate difference from Agent Lightning v0.3 (docs/store-semantics.md, "Deliberate differences").
 * Each test fails on a store that copies the reference's behaviour instead.
 */
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AttemptStatus, FilterLogic, RolloutStatus, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, expectRejectedUnchanged, ids, makeSpan, nextEvent, openStore, sleep, startRollout, timed } from "./harness.js";

describe.each(backends)("deliberate differences [$name]", (def) => {
  it("1. finished rollouts are sticky; only explicit calls change them; cancelling reaches the running attempt", async () => {
    const { store, clock } = await openStore(def);
    // Cancel a running rollout: its running attempt is cancelled too, and the runner learns it from span acks.
    const { rolloutId, attemptId } = await startRollout(store, { config: { timeoutSeconds: 5 } }, "w");
    await addSpan(store, rolloutId, attemptId);
    const cancelled = await store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED });
    expect(cancelled.status).toBe(RolloutStatus.CANCELLED);
    expect(cancelled.endTime).toBe(clock.t);
    expect(cancelled.latestAttempt?.status).toBe(AttemptStatus.CANCELLED);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.CANCELLED);
    const ack = await addSpan(store, rolloutId, attemptId);
    expect(ack.attemptStatus).toBe(AttemptStatus.CANCELLED);
    // The runner reports success anyway (the reference turns the rollout into succeeded): refused, with a reason the
    // runner can act on, and nothing changes, not even the spans sent along.
    for (const status of [AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.RUNNING]) {
      await expectRejectedUnchanged(
        store,
        () => store.updateAttempt({ rolloutId, attemptId, status, spans: [makeSpan(rolloutId, attemptId)], metadata: { done: true } }),
        Code.FailedPrecondition,
        /stays cancelled/,
        /rollout was cancelled/,
      );
    }
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.CANCELLED);
    // Its spans and metadata still land without a status, and repeating the cancellation is harmless.
    const reported = await store.updateAttempt({ rolloutId, attemptId, spans: [makeSpan(rolloutId, attemptId)], metadata: { done: true } });
    expect(reported).toMatchObject({ status: AttemptStatus.CANCELLED, metadata: { done: true } });
    expect((await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.CANCELLED })).status).toBe(AttemptStatus.CANCELLED);
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(3);
    let r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.CANCELLED);
    expect(r.endTime).toBe(cancelled.endTime);
    // Nor does the watchdog touch it.
    clock.advance(60);
    await store.runWatchdog();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.CANCELLED);

    // A succeeded rollout stays succeeded when its attempt is later marked failed with retries left.
    const s = await startRollout(store, { config: { maxAttempts: 3, retryCondition: [AttemptStatus.FAILED] } });
    await store.updateAttempt({ rolloutId: s.rolloutId, attemptId: s.attemptId, status: AttemptStatus.SUCCEEDED });
    await store.updateAttempt({ rolloutId: s.rolloutId, attemptId: s.attemptId, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId: s.rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);

    // Explicit calls still change a finished rollout.
    const restarted = await store.startAttempt({ rolloutId: s.rolloutId });
    expect(restarted.status).toBe(RolloutStatus.PREPARING);
    expect(restarted.endTime).toBeUndefined();
    r = await store.updateRollout({ rolloutId, status: RolloutStatus.RUNNING });
    expect(r.status).toBe(RolloutStatus.RUNNING);
  });

  it("2. spans promote queuing rollouts of the latest running attempt, but never revive a timed-out attempt's rollout", async () => {
    const { store } = await openStore(def);
    // A rollout requeued because its attempt went silent: a span of that attempt promotes it back to running.
    const { rolloutId, attemptId } = await startRollout(store);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.UNRESPONSIVE });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.REQUEUING);
    await addSpan(store, rolloutId, attemptId);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]); // its queue entry is skipped

    // Sent back to the queue explicitly (a runner handing it back), the running attempt ends: no span revives it.
    const q = await startRollout(store, {}, "w");
    await store.updateRollout({ rolloutId: q.rolloutId, status: RolloutStatus.QUEUING });
    expect((await store.getLatestAttempt({ rolloutId: q.rolloutId })).attempt?.status).toBe(AttemptStatus.CANCELLED);
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.IDLE);
    await addSpan(store, q.rolloutId, q.attemptId);
    expect((await store.getRollout({ rolloutId: q.rolloutId })).status).toBe(RolloutStatus.QUEUING);
    expect((await store.dequeueRollouts({})).rollouts.map((r) => r.latestAttempt?.sequenceId)).toEqual([2]);

    // A late span of a timed-out (latest) attempt leaves its requeuing rollout requeuing.
    const t = await startRollout(store, { config: { maxAttempts: 2, retryCondition: [AttemptStatus.TIMEOUT] } });
    await store.updateAttempt({ rolloutId: t.rolloutId, attemptId: t.attemptId, status: AttemptStatus.TIMEOUT });
    expect((await store.getRollout({ rolloutId: t.rolloutId })).status).toBe(RolloutStatus.REQUEUING);
    const ack = await addSpan(store, t.rolloutId, t.attemptId);
    expect(ack.attemptStatus).toBe(AttemptStatus.TIMEOUT);
    expect((await store.getRollout({ rolloutId: t.rolloutId })).status).toBe(RolloutStatus.REQUEUING);
    const [retry] = (await store.dequeueRollouts({})).rollouts;
    expect(retry?.rolloutId).toBe(t.rolloutId);
    expect(retry?.latestAttempt?.sequenceId).toBe(2);
  });

  it("3. the watchdog runs on a background timer, so timeouts fire when nobody calls the store", async () => {
    const { store, backend, clock } = await openStore(def, {
      watchdogIntervalSeconds: 0.05,
      scanDebounceSeconds: 1e9, // calls never scan after the first: only the timer can
    });
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 5 } }, "w");
    const finished = nextEvent(backend, (e) => e.kind === "finished" && e.rolloutIds.includes(rolloutId), 3000);
    clock.advance(10);
    await finished; // no store call in between
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.FAILED);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.TIMEOUT);
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.UNKNOWN);
  });

  it("4. unknown ids are NOT_FOUND everywhere, resources_id is validated, UpdateResources needs create_if_missing", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    const missing = "ro-123456789abc";
    await expectRejectedUnchanged(store, () => store.queryAttempts({ rolloutId: missing }), Code.NotFound, missing);
    await expectRejectedUnchanged(store, () => store.querySpans({ rolloutId: missing }), Code.NotFound, missing);
    await expectRejectedUnchanged(store, () => store.getLatestAttempt({ rolloutId: missing }), Code.NotFound, missing);
    await expectRejectedUnchanged(store, () => store.getRollout({ rolloutId: missing }), Code.NotFound, missing);
    await expectRejectedUnchanged(store, () => store.querySpans({ rolloutId, attemptId: "at-deadbeef" }), Code.NotFound, "at-deadbeef");
    await expectRejectedUnchanged(
      store,
      () => store.enqueueRollouts({ rollouts: [{}, { resourcesId: "rs-nonexistent0" }] }),
      Code.NotFound,
      "rs-nonexistent0",
    );
    await expectRejectedUnchanged(
      store,
      () => store.startRollout({ rollout: { resourcesId: "rs-nonexistent0" } }),
      Code.NotFound,
      "rs-nonexistent0",
    );
    await expectRejectedUnchanged(store, () => store.updateResources({ resourcesId: "custom", resources: {} }), Code.NotFound, "custom");
    const created = await store.updateResources({ resourcesId: "custom", resources: {}, createIfMissing: true });
    expect(created.version).toBe(1);
  });

  it("5. WaitForRollouts and DequeueRollouts block server-side past 0.1 s; a signal ends the wait", async () => {
    const { store } = await openStore(def, { realClock: true });
    const { rolloutId } = await startRollout(store);
    const waiting = timed(() => store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 5 }));
    await sleep(300);
    await store.updateRollout({ rolloutId, status: RolloutStatus.SUCCEEDED });
    const w = await waiting;
    expect(ids(w.value.rollouts)).toEqual([rolloutId]);
    expect(w.ms).toBeGreaterThanOrEqual(250);
    expect(w.ms).toBeLessThan(3000);

    const dequeue = timed(() => store.dequeueRollouts({ waitSeconds: 5 }));
    await sleep(300);
    const [queued] = await enqueueN(store, 1);
    const d = await dequeue;
    expect(ids(d.value.rollouts)).toEqual([queued!.rolloutId]);
    expect(d.ms).toBeGreaterThanOrEqual(250);

    const ac = new AbortController();
    const aborted = timed(() => store.waitForRollouts({ rolloutIds: [queued!.rolloutId] }, { signal: ac.signal }).catch((e: unknown) => e));
    await sleep(100);
    ac.abort();
    expect((await aborted).ms).toBeLessThan(2000);
  });

  it("6. AddSpans validates the whole batch first, is idempotent, and acks each span", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const good = makeSpan(rolloutId, attemptId);
    await expectRejectedUnchanged(
      store,
      () => store.addSpans({ spans: [good, makeSpan("ro-aaaaaaaaaaaa", attemptId)] }),
      Code.NotFound,
      "ro-aaaaaaaaaaaa",
    );
    expect((await store.querySpans({ rolloutId })).spans).toEqual([]);
    const first = await store.addSpans({ spans: [good] });
    expect(first.acks).toHaveLength(1);
    expect(first.acks[0]!.duplicate).toBe(false);
    const retry = await store.addSpans({ spans: [good, makeSpan(rolloutId, attemptId)] });
    expect(retry.acks.map((a) => a.duplicate)).toEqual([true, false]);
    expect(retry.acks[0]!.sequenceId).toBe(first.acks[0]!.sequenceId);
    expect((await store.querySpans({ rolloutId })).page?.total).toBe(2);
  });

  it("7. OR filters without conditions match everything (one suite for every backend)", async () => {
    const { store } = await openStore(def);
    expect((await store.getStatistics({})).backend).toBe(def.name);
    const rs = await enqueueN(store, 2);
    const { rolloutId, attemptId } = await startRollout(store, {}, "w");
    await store.addSpans({ spans: [makeSpan(rolloutId, attemptId), makeSpan(rolloutId, attemptId)] });
    const rollouts = await store.queryRollouts({ filterLogic: FilterLogic.OR });
    expect(ids(rollouts.rollouts)).toEqual([...ids(rs), rolloutId]);
    const spans = await store.querySpans({ rolloutId, filterLogic: FilterLogic.OR });
    expect(spans.spans).toHaveLength(2);
    const workers = await store.queryWorkers({ filterLogic: FilterLogic.OR });
    expect(workers.workers.map((w) => w.workerId)).toEqual(["w"]);
  });

  it("8. span sequence ids are per rollout and monotonic; spans are never ordered by wall-clock time", async () => {
    const { store } = await openStore(def);
    const a = await startRollout(store);
    const b = await startRollout(store);
    const spansA = [30, 20, 10].map((t) => makeSpan(a.rolloutId, a.attemptId, { startTime: t, endTime: t + 1 }));
    const acksA = (await store.addSpans({ spans: spansA })).acks;
    const acksB = (await store.addSpans({ spans: [makeSpan(b.rolloutId, b.attemptId)] })).acks;
    expect(acksA.map((x) => x.sequenceId)).toEqual([1, 2, 3]);
    expect(acksB.map((x) => x.sequenceId)).toEqual([1]);
    const later = await addSpan(store, a.rolloutId, a.attemptId, { startTime: 0 });
    expect(later.sequenceId).toBe(4);
    const stored = (await store.querySpans({ rolloutId: a.rolloutId })).spans;
    expect(stored.map((s) => s.sequenceId)).toEqual([1, 2, 3, 4]);
    expect(stored.map((s) => s.startTime)).toEqual([30, 20, 10, 0]);
  });

  it("9. empty repeated filters mean no condition", async () => {
    const { store } = await openStore(def);
    const rs = await enqueueN(store, 3);
    await store.dequeueRollouts({ workerId: "w" });
    const all = await store.queryRollouts({ statusIn: [], rolloutIdIn: [] });
    expect(ids(all.rollouts)).toEqual(ids(rs));
    expect(all.page?.total).toBe(3);
    const narrowed = await store.queryRollouts({ statusIn: [], rolloutIdIn: [rs[1]!.rolloutId] });
    expect(ids(narrowed.rollouts)).toEqual([rs[1]!.rolloutId]);
    expect((await store.queryWorkers({ statusIn: [] })).workers).toHaveLength(1);
  });
});
