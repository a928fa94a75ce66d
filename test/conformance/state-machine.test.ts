/**
 * Attempt/rollout state machine: span heartbeats, UpdateAttempt, the derive table, retries, non-latest updates and
 * recovery (reference §2.4 tables A and B, §10.1 "Attempts and propagation", "Requeue/recovery").
 */
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, openStore, type SpecExtra, startRollout } from "./harness.js";

/** A started rollout with `n` attempts (the last one latest). */
async function rolloutWithAttempts(store: Store, n: number, config: SpecExtra["config"] = {}) {
  const { rolloutId, attemptId } = await startRollout(store, { config });
  const attemptIds = [attemptId];
  for (let i = 1; i < n; i++) attemptIds.push((await store.startAttempt({ rolloutId })).latestAttempt!.attemptId);
  return { rolloutId, attemptIds };
}

describe.each(backends)("state machine [$name]", (def) => {
  it("a span makes a preparing attempt running with a heartbeat, and its rollout running", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    clock.advance(1.5);
    const ack = await addSpan(store, rolloutId, attemptId);
    expect(ack.attemptStatus).toBe(AttemptStatus.RUNNING);
    const a = (await store.getLatestAttempt({ rolloutId })).attempt!;
    expect(a.status).toBe(AttemptStatus.RUNNING);
    expect(a.lastHeartbeatTime).toBe(clock.t);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
  });

  it("a dequeued rollout goes preparing → running → succeeded with end times", async () => {
    const { store, clock } = await openStore(def);
    const [r] = await enqueueN(store, 1);
    const rolloutId = r!.rolloutId;
    expect(r!.status).toBe(RolloutStatus.QUEUING);
    const [d] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
    expect(d!.status).toBe(RolloutStatus.PREPARING);
    const attemptId = d!.latestAttempt!.attemptId;
    clock.advance(1);
    const ack = await addSpan(store, rolloutId, attemptId);
    expect(ack.sequenceId).toBe(1);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    clock.advance(1);
    const done = await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect(done.status).toBe(AttemptStatus.SUCCEEDED);
    expect(done.endTime).toBe(clock.t);
    const got = await store.getRollout({ rolloutId });
    expect(got.status).toBe(RolloutStatus.SUCCEEDED);
    expect(got.endTime).toBe(clock.t);
    expect(got.endTime!).toBeGreaterThan(got.startTime);
  });

  it("later spans advance the heartbeat", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    const first = (await store.getLatestAttempt({ rolloutId })).attempt!.lastHeartbeatTime;
    clock.advance(100);
    await addSpan(store, rolloutId, attemptId);
    const a = (await store.getLatestAttempt({ rolloutId })).attempt!;
    expect(a.lastHeartbeatTime).toBe(first! + 100);
    expect(a.status).toBe(AttemptStatus.RUNNING);
  });

  it("UpdateAttempt sets end_time for failed and succeeded only", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    clock.advance(1);
    const running = await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.RUNNING });
    expect(running.endTime).toBeUndefined();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    clock.advance(1);
    const failed = await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.FAILED });
    expect(failed.endTime).toBe(clock.t);
    expect(failed.endTime!).toBeGreaterThanOrEqual(failed.startTime);
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.FAILED);
    expect(r.endTime!).toBeGreaterThanOrEqual(failed.endTime!);
  });

  it('UpdateAttempt with "latest" targets the latest attempt', async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptIds } = await rolloutWithAttempts(store, 3);
    const a = await store.updateAttempt({ rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED });
    expect(a.attemptId).toBe(attemptIds[2]);
    expect(a.sequenceId).toBe(3);
    expect(a.endTime).toBeDefined();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    const attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts.map((x) => x.status)).toEqual([AttemptStatus.PREPARING, AttemptStatus.PREPARING, AttemptStatus.SUCCEEDED]);
  });

  it("UpdateAttempt replaces worker_id, last_heartbeat_time and metadata", async () => {
    // A heartbeat far in the past: no default unresponsive limit, so the watchdog leaves it alone.
    const { store } = await openStore(def, { defaultUnresponsiveSeconds: 0 });
    const { rolloutId, attemptId } = await startRollout(store);
    const a = await store.updateAttempt({
      rolloutId,
      attemptId,
      status: AttemptStatus.RUNNING,
      workerId: "w2",
      lastHeartbeatTime: 12345.5,
      metadata: { note: "hi" },
    });
    const stored = (await store.getLatestAttempt({ rolloutId })).attempt!;
    for (const x of [a, stored]) {
      expect(x.status).toBe(AttemptStatus.RUNNING);
      expect(x.workerId).toBe("w2");
      expect(x.lastHeartbeatTime).toBe(12345.5);
      expect(x.metadata).toEqual({ note: "hi" });
    }
  });

  // Table B, with the combinations the reference tests.
  const R = [AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE];
  it.each([
    { s: AttemptStatus.FAILED, cond: [AttemptStatus.FAILED], max: 3, seq: 1, want: RolloutStatus.REQUEUING },
    { s: AttemptStatus.FAILED, cond: [AttemptStatus.FAILED], max: 3, seq: 3, want: RolloutStatus.FAILED },
    { s: AttemptStatus.FAILED, cond: [AttemptStatus.TIMEOUT], max: 3, seq: 1, want: RolloutStatus.FAILED },
    { s: AttemptStatus.TIMEOUT, cond: [AttemptStatus.TIMEOUT], max: 3, seq: 2, want: RolloutStatus.REQUEUING },
    { s: AttemptStatus.TIMEOUT, cond: [AttemptStatus.FAILED], max: 3, seq: 1, want: RolloutStatus.FAILED },
    { s: AttemptStatus.UNRESPONSIVE, cond: [AttemptStatus.UNRESPONSIVE], max: 2, seq: 1, want: RolloutStatus.REQUEUING },
    { s: AttemptStatus.UNRESPONSIVE, cond: R, max: 1, seq: 1, want: RolloutStatus.FAILED },
    { s: AttemptStatus.FAILED, cond: R, max: 0, seq: 1, want: RolloutStatus.FAILED },
    { s: AttemptStatus.SUCCEEDED, cond: R, max: 3, seq: 1, want: RolloutStatus.SUCCEEDED },
    { s: AttemptStatus.CANCELLED, cond: R, max: 3, seq: 1, want: RolloutStatus.CANCELLED },
    { s: AttemptStatus.RUNNING, cond: R, max: 3, seq: 2, want: RolloutStatus.RUNNING },
  ])(
    "derive: attempt $s (retry_condition $cond, max_attempts $max, sequence $seq) → rollout $want",
    async ({ s, cond, max, seq, want }) => {
      const { store } = await openStore(def);
      const { rolloutId } = await rolloutWithAttempts(store, seq, { maxAttempts: max, retryCondition: cond });
      await store.updateAttempt({ rolloutId, attemptId: "latest", status: s });
      const r = await store.getRollout({ rolloutId });
      expect(RolloutStatus[r.status]).toBe(RolloutStatus[want]);
      const finished = [RolloutStatus.FAILED, RolloutStatus.SUCCEEDED, RolloutStatus.CANCELLED].includes(want);
      expect(r.endTime !== undefined).toBe(finished);
      // requeuing puts the rollout back in the queue; anything else leaves the queue empty
      const claimed = (await store.dequeueRollouts({ limit: 5 })).rollouts;
      expect(claimed.length).toBe(want === RolloutStatus.REQUEUING ? 1 : 0);
      if (claimed.length) expect(claimed[0]!.latestAttempt?.sequenceId).toBe(seq + 1);
    },
  );

  it("derive: a running rollout whose latest attempt goes back to preparing is preparing", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.PREPARING });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
  });

  it("retries until max_attempts is exhausted, then fails", async () => {
    const { store, clock } = await openStore(def);
    const [r] = await enqueueN(store, 1, { config: { maxAttempts: 3, retryCondition: [AttemptStatus.FAILED] } });
    const rolloutId = r!.rolloutId;
    for (let seq = 1; seq <= 3; seq++) {
      const [d] = (await store.dequeueRollouts({})).rollouts;
      expect(d?.rolloutId).toBe(rolloutId);
      expect(d?.latestAttempt?.sequenceId).toBe(seq);
      await addSpan(store, rolloutId, d!.latestAttempt!.attemptId);
      clock.advance(1);
      await store.updateAttempt({ rolloutId, attemptId: d!.latestAttempt!.attemptId, status: AttemptStatus.FAILED });
      const got = await store.getRollout({ rolloutId });
      expect(got.status).toBe(seq < 3 ? RolloutStatus.REQUEUING : RolloutStatus.FAILED);
      expect(got.endTime).toBe(seq < 3 ? undefined : clock.t);
    }
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
    const attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.FAILED, AttemptStatus.FAILED, AttemptStatus.FAILED]);
  });

  it("full retry lifecycle: fail, requeue, retry, succeed", async () => {
    const { store } = await openStore(def);
    const [r] = await enqueueN(store, 1);
    const rolloutId = r!.rolloutId;
    const [d1] = (await store.dequeueRollouts({})).rollouts;
    const a1 = d1!.latestAttempt!.attemptId;
    await addSpan(store, rolloutId, a1);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    const f = await store.updateAttempt({ rolloutId, attemptId: a1, status: AttemptStatus.FAILED });
    expect(f.endTime).toBeDefined();
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    const [d2] = (await store.dequeueRollouts({})).rollouts;
    expect(d2?.latestAttempt?.sequenceId).toBe(2);
    expect(d2?.status).toBe(RolloutStatus.PREPARING);
    const a2 = d2!.latestAttempt!.attemptId;
    await addSpan(store, rolloutId, a2);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    await store.updateAttempt({ rolloutId, attemptId: a2, status: AttemptStatus.SUCCEEDED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    const attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.FAILED, AttemptStatus.SUCCEEDED]);
  });

  it("an update that leaves the latest attempt's status as it was never moves the rollout: a handed-back rollout stays requeuing", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.CANCELLED);
    // A heartbeat in flight during the hand-back, the runner's metadata-only report, and a retried cancelled status.
    await store.updateAttempt({ rolloutId, attemptId, lastHeartbeatTime: clock.t });
    await store.updateAttempt({ rolloutId, attemptId, metadata: { handed_back: "the runner shut down" } });
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.CANCELLED });
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.REQUEUING);
    expect(r.endTime).toBeUndefined();
    const [again] = (await store.dequeueRollouts({})).rollouts;
    expect(again?.rolloutId).toBe(rolloutId);
    expect(again?.latestAttempt?.sequenceId).toBe(2);
  });

  it("a heartbeat-only update leaves a running rollout running, and a new status still moves it", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    clock.advance(1);
    await store.updateAttempt({ rolloutId, attemptId, lastHeartbeatTime: clock.t });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
  });

  it("updates of a non-latest attempt never change the rollout", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptIds } = await rolloutWithAttempts(store, 3);
    await store.updateAttempt({ rolloutId, attemptId: attemptIds[0]!, status: AttemptStatus.SUCCEEDED });
    await store.updateAttempt({ rolloutId, attemptId: attemptIds[1]!, status: AttemptStatus.FAILED });
    let r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.PREPARING);
    expect(r.endTime).toBeUndefined();
    await store.updateAttempt({ rolloutId, attemptId: attemptIds[2]!, status: AttemptStatus.SUCCEEDED });
    r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.SUCCEEDED);
  });

  it("retry propagation only for the latest attempt", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptIds } = await rolloutWithAttempts(store, 2, {
      maxAttempts: 3,
      retryCondition: [AttemptStatus.FAILED],
    });
    await store.updateAttempt({ rolloutId, attemptId: attemptIds[0]!, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    expect((await store.dequeueRollouts({})).rollouts).toEqual([]);
    await store.updateAttempt({ rolloutId, attemptId: attemptIds[1]!, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.REQUEUING);
  });

  it("the latest attempt changes when a new attempt is added", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId: a1 } = await startRollout(store);
    await store.updateAttempt({ rolloutId, attemptId: a1, status: AttemptStatus.SUCCEEDED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    const restarted = await store.startAttempt({ rolloutId });
    const a2 = restarted.latestAttempt!.attemptId;
    expect(restarted.status).toBe(RolloutStatus.PREPARING);
    expect(restarted.endTime).toBeUndefined();
    await store.updateAttempt({ rolloutId, attemptId: a1, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    await store.updateAttempt({ rolloutId, attemptId: a2, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("an unresponsive attempt recovers with a span; the queued retry is then skipped", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {
      config: { maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] },
    });
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.UNRESPONSIVE });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.REQUEUING);
    const ack = await addSpan(store, rolloutId, attemptId);
    expect(ack.attemptStatus).toBe(AttemptStatus.RUNNING);
    const a = (await store.getLatestAttempt({ rolloutId })).attempt!;
    expect(a.status).toBe(AttemptStatus.RUNNING);
    expect(a.lastHeartbeatTime).toBeDefined();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
    expect((await store.queryAttempts({ rolloutId })).attempts).toHaveLength(1);
  });

  it("a recovered attempt that succeeds finishes the rollout without a new attempt", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {
      config: { maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] },
    });
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.UNRESPONSIVE });
    await addSpan(store, rolloutId, attemptId);
    const done = await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect(done.endTime).toBeDefined();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
  });

  it("a recovered attempt that fails (not retryable) fails the rollout", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {
      config: { maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] },
    });
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.UNRESPONSIVE });
    await addSpan(store, rolloutId, attemptId);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
  });

  it("spans of an old attempt after the retry started update only that attempt", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId: old } = await startRollout(store, {
      config: { maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] },
    });
    await store.updateAttempt({ rolloutId, attemptId: old, status: AttemptStatus.UNRESPONSIVE });
    const [retry] = (await store.dequeueRollouts({})).rollouts;
    expect(retry?.latestAttempt?.sequenceId).toBe(2);
    await addSpan(store, rolloutId, old);
    const attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts[0]!.status).toBe(AttemptStatus.RUNNING);
    expect(attempts[1]!.status).toBe(AttemptStatus.PREPARING);
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.PREPARING);
    expect(r.latestAttempt?.sequenceId).toBe(2);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
  });

  it("a span does not revive a timed-out attempt", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.TIMEOUT });
    const before = await store.getRollout({ rolloutId });
    expect(before.status).toBe(RolloutStatus.FAILED);
    const ack = await addSpan(store, rolloutId, attemptId);
    expect(ack.attemptStatus).toBe(AttemptStatus.TIMEOUT);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.TIMEOUT);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("spans never change failed, succeeded or cancelled attempts", async () => {
    const { store } = await openStore(def);
    for (const s of [AttemptStatus.FAILED, AttemptStatus.SUCCEEDED, AttemptStatus.CANCELLED]) {
      const { rolloutId, attemptId } = await startRollout(store);
      await store.updateAttempt({ rolloutId, attemptId, status: s });
      const status = (await store.getRollout({ rolloutId })).status;
      const ack = await addSpan(store, rolloutId, attemptId);
      expect(AttemptStatus[ack.attemptStatus]).toBe(AttemptStatus[s]);
      expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(s);
      expect((await store.getRollout({ rolloutId })).status).toBe(status);
    }
  });
});
