/** Workers: heartbeats and the synchronisation table (reference §2.4 table C, §2.7, §10.1 "Workers"). */
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, openStore, startRollout } from "./harness.js";

describe.each(backends)("workers [$name]", (def) => {
  it("UpdateWorker creates an unknown worker with its stats and heartbeat time", async () => {
    const { store, clock } = await openStore(def);
    const w = await store.updateWorker({ workerId: "w1", heartbeatStats: { cpu_pct: 12.5, host: "h" } });
    expect(w.workerId).toBe("w1");
    expect(w.status).toBe(WorkerStatus.UNKNOWN);
    expect(w.heartbeatStats).toEqual({ cpu_pct: 12.5, host: "h" });
    expect(w.lastHeartbeatTime).toBe(clock.t);
    expect(w.lastDequeueTime).toBeUndefined();
    expect(w.lastBusyTime).toBeUndefined();
    expect(w.lastIdleTime).toBeUndefined();
    expect(w.currentRolloutId).toBe("");
    expect(await store.getWorker({ workerId: "w1" })).toEqual(w);
    clock.advance(2);
    const again = await store.updateWorker({ workerId: "w1", heartbeatStats: { cpu_pct: 1 } });
    expect(again.lastHeartbeatTime).toBe(clock.t);
    expect(again.heartbeatStats).toEqual({ cpu_pct: 1 });
    expect((await store.queryWorkers({})).page?.total).toBe(1);
  });

  it("a heartbeat never changes the status or the current attempt", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {}, "w");
    const w = await store.updateWorker({ workerId: "w", heartbeatStats: { x: 1 } });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentRolloutId).toBe(rolloutId);
    expect(w.currentAttemptId).toBe(attemptId);
  });

  it("dequeue makes the worker busy; the attempt's outcome makes it idle", async () => {
    const { store, clock } = await openStore(def);
    await store.updateWorker({ workerId: "w", heartbeatStats: { cpu: 1 } });
    const hb = clock.t;
    await enqueueN(store, 1);
    clock.advance(1);
    const [r] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
    let w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentRolloutId).toBe(r!.rolloutId);
    expect(w.currentAttemptId).toBe(r!.latestAttempt!.attemptId);
    expect(w.lastDequeueTime).toBe(clock.t);
    expect(w.lastBusyTime).toBe(clock.t);
    expect(w.heartbeatStats).toEqual({ cpu: 1 });
    expect(w.lastHeartbeatTime).toBe(hb);
    clock.advance(1);
    await store.updateAttempt({
      rolloutId: r!.rolloutId,
      attemptId: r!.latestAttempt!.attemptId,
      status: AttemptStatus.SUCCEEDED,
    });
    w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.IDLE);
    expect(w.currentRolloutId).toBe("");
    expect(w.currentAttemptId).toBe("");
    expect(w.lastIdleTime).toBe(clock.t);
    expect(w.heartbeatStats).toEqual({ cpu: 1 });
    expect(w.lastHeartbeatTime).toBe(hb);
    expect(ids((await store.queryWorkers({})).workers)).toEqual(["w"]);
  });

  it.each([
    { s: AttemptStatus.FAILED, want: WorkerStatus.IDLE },
    { s: AttemptStatus.CANCELLED, want: WorkerStatus.IDLE },
    { s: AttemptStatus.TIMEOUT, want: WorkerStatus.UNKNOWN },
    { s: AttemptStatus.UNRESPONSIVE, want: WorkerStatus.UNKNOWN },
    { s: AttemptStatus.RUNNING, want: WorkerStatus.BUSY },
  ])("attempt $s → worker $want", async ({ s, want }) => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {}, "w");
    clock.advance(1);
    await store.updateAttempt({ rolloutId, attemptId, status: s });
    const w = await store.getWorker({ workerId: "w" });
    expect(WorkerStatus[w.status]).toBe(WorkerStatus[want]);
    if (want === WorkerStatus.BUSY) {
      expect(w.currentAttemptId).toBe(attemptId);
      expect(w.lastBusyTime).toBe(clock.t);
    } else {
      expect(w.currentRolloutId).toBe("");
      expect(w.currentAttemptId).toBe("");
      expect(w.lastIdleTime).toBe(clock.t);
    }
  });

  it("a span reviving an unresponsive attempt makes its worker busy again", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, { config: { unresponsiveSeconds: 2 } }, "w");
    clock.advance(3);
    await store.runWatchdog();
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.UNKNOWN);
    await addSpan(store, rolloutId, attemptId);
    const w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentRolloutId).toBe(rolloutId);
    expect(w.currentAttemptId).toBe(attemptId);
  });

  it("cancelling a rollout frees the worker of its running attempt", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId } = await startRollout(store, {}, "w");
    clock.advance(1);
    await store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED });
    const w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.IDLE);
    expect(w.currentAttemptId).toBe("");
    expect(w.lastIdleTime).toBe(clock.t);
  });

  it("StartRollout with a worker makes it busy on attempt #1", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId, rollout } = await startRollout(store, {}, "runner-1");
    expect(rollout.latestAttempt?.workerId).toBe("runner-1");
    const w = await store.getWorker({ workerId: "runner-1" });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentRolloutId).toBe(rolloutId);
    expect(w.currentAttemptId).toBe(attemptId);
  });

  it("StartAttempt with a worker makes it busy on the retry", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    const r = await store.startAttempt({ rolloutId, workerId: "w2" });
    expect(r.latestAttempt?.sequenceId).toBe(2);
    const w = await store.getWorker({ workerId: "w2" });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentAttemptId).toBe(r.latestAttempt?.attemptId);
  });

  it("dequeue of many binds the worker to the last claimed attempt", async () => {
    const { store } = await openStore(def);
    await enqueueN(store, 3);
    const claimed = (await store.dequeueRollouts({ limit: 3, workerId: "w" })).rollouts;
    const w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.BUSY);
    expect(w.currentRolloutId).toBe(claimed[2]!.rolloutId);
    expect(w.currentAttemptId).toBe(claimed[2]!.latestAttempt?.attemptId);
  });

  it("an empty dequeue marks the worker idle and stamps last_dequeue_time", async () => {
    const { store, clock } = await openStore(def);
    await store.updateWorker({ workerId: "w" });
    clock.advance(1);
    expect((await store.dequeueRollouts({ workerId: "w" })).rollouts).toEqual([]);
    let w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.IDLE);
    expect(w.lastDequeueTime).toBe(clock.t);
    expect(w.lastIdleTime).toBe(clock.t);
    clock.advance(1);
    await store.dequeueRollouts({ workerId: "w" });
    w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.IDLE);
    expect(w.lastDequeueTime).toBe(clock.t);
    // A worker first seen on an empty dequeue is created idle.
    await store.dequeueRollouts({ workerId: "fresh" });
    expect((await store.getWorker({ workerId: "fresh" })).status).toBe(WorkerStatus.IDLE);
  });

  it("calls without a worker id create no worker", async () => {
    const { store } = await openStore(def);
    await enqueueN(store, 2);
    const [r] = (await store.dequeueRollouts({})).rollouts;
    expect(r!.latestAttempt?.workerId).toBe("");
    await store.dequeueRollouts({ limit: 5 });
    await store.dequeueRollouts({});
    await startRollout(store);
    expect((await store.queryWorkers({})).workers).toEqual([]);
    expect((await store.getStatistics({})).totalWorkers).toBe(0);
  });
});

const ids = (ws: Array<{ workerId: string }>) => ws.map((w) => w.workerId);
