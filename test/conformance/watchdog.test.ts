/**
 * The watchdog: timeouts, unresponsiveness, retries it triggers, worker sync and the on-call debounce
 * (reference §2.4 A11/A12, §2.6, §10.1 "healthcheck" and "Watchdog debounce"). Time is a fake clock.
 */
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { DEFAULT_UNRESPONSIVE_SECONDS, INFRASTRUCTURE_ATTEMPTS } from "../../src/store/liveness.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, nextEvent, openStore, startRollout } from "./harness.js";

describe.each(backends)("watchdog [$name]", (def) => {
  it("times out the latest attempt after timeout_seconds and requeues it for a retry", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {
      config: { timeoutSeconds: 10, maxAttempts: 2, retryCondition: [AttemptStatus.TIMEOUT] },
    });
    clock.advance(9);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    clock.advance(2);
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.REQUEUING);
    expect(r.latestAttempt?.attemptId).toBe(attemptId);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.TIMEOUT);
    expect(r.latestAttempt?.endTime).toBeUndefined();
    const [retry] = (await store.dequeueRollouts({})).rollouts;
    expect(retry?.rolloutId).toBe(rolloutId);
    expect(retry?.latestAttempt?.sequenceId).toBe(2);
  });

  it("measures the timeout from the attempt start, not the rollout start", async () => {
    const { store, clock } = await openStore(def);
    const [r] = await enqueueN(store, 1, { config: { timeoutSeconds: 10 } });
    clock.advance(100);
    await store.dequeueRollouts({});
    clock.advance(5);
    expect((await store.getRollout({ rolloutId: r!.rolloutId })).status).toBe(RolloutStatus.PREPARING);
    clock.advance(6);
    const got = await store.getRollout({ rolloutId: r!.rolloutId });
    expect(got.status).toBe(RolloutStatus.FAILED);
    expect(got.latestAttempt?.status).toBe(AttemptStatus.TIMEOUT);
  });

  it("marks an attempt without heartbeat unresponsive; not retryable → rollout failed", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId } = await startRollout(store, {
      config: { unresponsiveSeconds: 5, maxAttempts: 3, retryCondition: [AttemptStatus.TIMEOUT] },
    });
    clock.advance(4);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.PREPARING);
    clock.advance(2);
    const r = await store.getRollout({ rolloutId });
    expect(r.latestAttempt?.status).toBe(AttemptStatus.UNRESPONSIVE);
    expect(r.status).toBe(RolloutStatus.FAILED);
    expect(r.endTime).toBe(clock.t);
  });

  it("measures unresponsiveness from the last heartbeat", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, { config: { unresponsiveSeconds: 5 } });
    clock.advance(4);
    await addSpan(store, rolloutId, attemptId);
    clock.advance(4); // 8 s after start, 4 s after the heartbeat
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.RUNNING);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.RUNNING);
    clock.advance(2);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.UNRESPONSIVE);
  });

  it("checks the timeout before unresponsiveness", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 5, unresponsiveSeconds: 5 } });
    clock.advance(6);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.TIMEOUT);
  });

  it("a watchdog verdict makes the worker unknown and keeps its heartbeat fields", async () => {
    const { store, clock } = await openStore(def);
    await store.updateWorker({ workerId: "w", heartbeatStats: { cpu: 1 } });
    const hb = (await store.getWorker({ workerId: "w" })).lastHeartbeatTime;
    const { rolloutId } = await startRollout(store, { config: { unresponsiveSeconds: 2 } }, "w");
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.BUSY);
    clock.advance(3);
    await store.runWatchdog();
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.UNRESPONSIVE);
    const w = await store.getWorker({ workerId: "w" });
    expect(w.status).toBe(WorkerStatus.UNKNOWN);
    expect(w.currentRolloutId).toBe("");
    expect(w.currentAttemptId).toBe("");
    expect(w.lastIdleTime).toBe(clock.t);
    expect(w.heartbeatStats).toEqual({ cpu: 1 });
    expect(w.lastHeartbeatTime).toBe(hb);
  });

  it("leaves queued and finished rollouts alone", async () => {
    const { store, clock } = await openStore(def);
    const config = { timeoutSeconds: 1, unresponsiveSeconds: 1 };
    const [queued] = await enqueueN(store, 1, { config });
    const { rolloutId: done, attemptId } = await startRollout(store, { config });
    await store.updateAttempt({ rolloutId: done, attemptId, status: AttemptStatus.SUCCEEDED });
    clock.advance(50);
    await store.runWatchdog();
    expect((await store.getRollout({ rolloutId: queued!.rolloutId })).status).toBe(RolloutStatus.QUEUING);
    const d = await store.getRollout({ rolloutId: done });
    expect(d.status).toBe(RolloutStatus.SUCCEEDED);
    expect(d.latestAttempt?.status).toBe(AttemptStatus.SUCCEEDED);
  });

  it("rollouts without timeouts are never touched when the store sets no default unresponsive limit", async () => {
    const { store, clock } = await openStore(def, { defaultUnresponsiveSeconds: 0 });
    const { rolloutId } = await startRollout(store);
    clock.advance(1e6);
    await store.runWatchdog();
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.PREPARING);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.PREPARING);
  });

  it("by default, an attempt silent for six runner heartbeats is unresponsive and, with no retry policy, retried as an infrastructure failure", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    clock.advance(DEFAULT_UNRESPONSIVE_SECONDS - 1);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    clock.advance(2);
    const r = await store.getRollout({ rolloutId });
    expect(r.latestAttempt?.status).toBe(AttemptStatus.UNRESPONSIVE);
    expect(r.status).toBe(RolloutStatus.REQUEUING);
    // Up to INFRASTRUCTURE_ATTEMPTS attempts; then the rollout fails.
    for (let n = 2; n <= INFRASTRUCTURE_ATTEMPTS; n++) {
      const [again] = (await store.dequeueRollouts({})).rollouts;
      expect(again?.latestAttempt?.sequenceId).toBe(n);
      clock.advance(DEFAULT_UNRESPONSIVE_SECONDS + 1);
      await store.runWatchdog();
    }
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("a worker whose heartbeats stop is gone: marked unknown, its running attempts unresponsive and handed back", async () => {
    const { store, clock } = await openStore(def, { workerGoneSeconds: 10, defaultUnresponsiveSeconds: 0 });
    await store.updateWorker({ workerId: "w" });
    const first = await startRollout(store, {}, "w");
    const second = await startRollout(store, {}, "w");
    const other = await startRollout(store, {}, "never-beats");
    clock.advance(5);
    await store.updateWorker({ workerId: "w" });
    clock.advance(8);
    // Attempts keep running while their worker beats (13 s since the attempts started, 8 s since the last beat).
    await store.runWatchdog();
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.BUSY);
    clock.advance(3);
    await store.runWatchdog();
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.UNKNOWN);
    for (const { rolloutId } of [first, second]) {
      const r = await store.getRollout({ rolloutId });
      expect([r.latestAttempt?.status, r.status]).toEqual([AttemptStatus.UNRESPONSIVE, RolloutStatus.REQUEUING]);
    }
    // A worker that never sent a heartbeat is not judged by them.
    expect((await store.getRollout({ rolloutId: other.rolloutId })).status).toBe(RolloutStatus.PREPARING);
  });

  it("the agent's own failure is not retried by default", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.FAILED });
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("an unresponsive attempt that recovers keeps its rollout running and the retry is skipped", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {
      config: { unresponsiveSeconds: 1, maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] },
    });
    clock.advance(5);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.REQUEUING);
    await addSpan(store, rolloutId, attemptId);
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.RUNNING);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.RUNNING);
    expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
  });

  it("the last allowed attempt timing out fails the rollout", async () => {
    const { store, clock } = await openStore(def);
    const [r] = await enqueueN(store, 1, {
      config: { timeoutSeconds: 3, maxAttempts: 2, retryCondition: [AttemptStatus.TIMEOUT] },
    });
    await store.dequeueRollouts({});
    clock.advance(4);
    const [retry] = (await store.dequeueRollouts({})).rollouts;
    expect(retry?.latestAttempt?.sequenceId).toBe(2);
    clock.advance(4);
    const got = await store.getRollout({ rolloutId: r!.rolloutId });
    expect(got.status).toBe(RolloutStatus.FAILED);
    expect(got.endTime).toBe(clock.t);
    const attempts = (await store.queryAttempts({ rolloutId: r!.rolloutId })).attempts;
    expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.TIMEOUT, AttemptStatus.TIMEOUT]);
  });

  it("runs at the start of calls, debounced by scanDebounceSeconds", async () => {
    const { store, clock } = await openStore(def, { scanDebounceSeconds: 10 });
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 5 } });
    clock.advance(6);
    // The scan at StartRollout was less than 10 s ago: this read does not scan.
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    clock.advance(4);
    const r = await store.getRollout({ rolloutId });
    expect(r.status).toBe(RolloutStatus.FAILED);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.TIMEOUT);
  });

  it("runWatchdog scans regardless of the debounce", async () => {
    const { store, clock } = await openStore(def, { scanDebounceSeconds: 1000 });
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 5 } });
    clock.advance(20);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    await store.runWatchdog();
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("with watchdogIntervalSeconds 0 there is no background scan", async () => {
    const { store, backend, clock } = await openStore(def, { watchdogIntervalSeconds: 0, scanDebounceSeconds: 1e9 });
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 1 } });
    clock.advance(10);
    await expect(nextEvent(backend, (e) => e.kind === "finished", 300)).rejects.toThrow(/no matching store event/);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
  });

  it("with debounce 0 every call scans", async () => {
    const { store, clock } = await openStore(def, { scanDebounceSeconds: 0 });
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 5 } });
    clock.advance(0.5);
    await store.getRollout({ rolloutId });
    clock.advance(5);
    expect((await store.queryRollouts({ rolloutIdIn: [rolloutId] })).rollouts[0]?.status).toBe(RolloutStatus.FAILED);
  });
});
