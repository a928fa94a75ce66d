/**
 * Blocking calls: long-poll DequeueRollouts and WaitForRollouts, their timeouts, and ending them early with an
 * AbortSignal (reference §2.8, §10.1 "Lifecycle, waiting"; our difference 5). These use the wall clock and short
 * real waits.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { enqueueN, expectCode, ids, openStore, sleep, startRollout, timed, withTimeout } from "./harness.js";

/** How a call that was aborted ended: promptly, either empty-handed or with CANCELED/DEADLINE_EXCEEDED. */
async function settleAborted(p: Promise<{ rollouts: unknown[] }>): Promise<void> {
  try {
    const res = await p;
    expect(res.rollouts).toEqual([]);
  } catch (e) {
    expect(e).toBeInstanceOf(ConnectError);
    expect([Code.Canceled, Code.DeadlineExceeded]).toContain((e as ConnectError).code);
  }
}

describe.each(backends)("waits [$name]", (def) => {
  describe("DequeueRollouts long-poll", () => {
    it("wakes when a rollout is enqueued", async () => {
      const { store } = await openStore(def, { realClock: true });
      const waiting = timed(() => store.dequeueRollouts({ waitSeconds: 10, workerId: "w" }));
      await sleep(150);
      const [r] = await enqueueN(store, 1);
      const { ms, value } = await waiting;
      expect(ids(value.rollouts)).toEqual([r!.rolloutId]);
      expect(value.rollouts[0]!.status).toBe(RolloutStatus.PREPARING);
      expect(ms).toBeGreaterThanOrEqual(100);
      expect(ms).toBeLessThan(3000);
    });

    it("wakes when a failed attempt requeues its rollout", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId, attemptId } = await startRollout(store, {
        config: { maxAttempts: 2, retryCondition: [AttemptStatus.FAILED] },
      });
      const waiting = timed(() => store.dequeueRollouts({ waitSeconds: 10 }));
      await sleep(100);
      await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.FAILED });
      const { ms, value } = await waiting;
      expect(ids(value.rollouts)).toEqual([rolloutId]);
      expect(value.rollouts[0]!.latestAttempt?.sequenceId).toBe(2);
      expect(ms).toBeLessThan(3000);
    });

    it("returns at once when work is queued", async () => {
      const { store } = await openStore(def, { realClock: true });
      await enqueueN(store, 2);
      const { ms, value } = await timed(() => store.dequeueRollouts({ waitSeconds: 10, limit: 5 }));
      expect(value.rollouts).toHaveLength(2);
      expect(ms).toBeLessThan(1000);
    });

    it("returns empty after about wait_seconds when nothing arrives", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { ms, value } = await timed(() => store.dequeueRollouts({ waitSeconds: 0.3 }));
      expect(value.rollouts).toEqual([]);
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(2000);
    });

    it("two waiting dequeues split the work without double claims", async () => {
      const { store } = await openStore(def, { realClock: true });
      const a = store.dequeueRollouts({ waitSeconds: 1, workerId: "a" });
      const b = store.dequeueRollouts({ waitSeconds: 1, workerId: "b" });
      await sleep(100);
      const rs = await enqueueN(store, 2);
      const [ra, rb] = await Promise.all([a, b]);
      const claimed = [...ids(ra.rollouts), ...ids(rb.rollouts)].sort();
      expect(claimed).toEqual(ids(rs).sort());
    });

    it("an AbortSignal ends the wait early", async () => {
      const { store } = await openStore(def, { realClock: true });
      const ac = new AbortController();
      const p = timed(() => settleAborted(store.dequeueRollouts({ waitSeconds: 20 }, { signal: ac.signal })));
      await sleep(100);
      ac.abort();
      const { ms } = await p;
      expect(ms).toBeLessThan(2000);
      // Nothing is claimed by the abandoned wait.
      const [r] = await enqueueN(store, 1);
      expect(ids((await store.dequeueRollouts({})).rollouts)).toEqual([r!.rolloutId]);
    });
  });

  describe("WaitForRollouts", () => {
    it("returns when another call finishes the rollouts", async () => {
      const { store } = await openStore(def, { realClock: true });
      const a = await startRollout(store);
      const b = await startRollout(store);
      const waiting = timed(() => store.waitForRollouts({ rolloutIds: [a.rolloutId, b.rolloutId], timeoutSeconds: 10 }));
      await sleep(100);
      await store.updateAttempt({ rolloutId: b.rolloutId, attemptId: b.attemptId, status: AttemptStatus.FAILED });
      await sleep(100);
      await store.updateAttempt({ rolloutId: a.rolloutId, attemptId: a.attemptId, status: AttemptStatus.SUCCEEDED });
      const { ms, value } = await waiting;
      expect(ids(value.rollouts)).toEqual([a.rolloutId, b.rolloutId]);
      expect(value.rollouts.map((r) => r.status)).toEqual([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED]);
      expect(ms).toBeGreaterThanOrEqual(150);
      expect(ms).toBeLessThan(3000);
    });

    it("with no timeout waits until the rollout finishes", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const waiting = timed(() => store.waitForRollouts({ rolloutIds: [rolloutId] }));
      await sleep(300);
      await store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED });
      const { ms, value } = await waiting;
      expect(ids(value.rollouts)).toEqual([rolloutId]);
      expect(value.rollouts[0]!.status).toBe(RolloutStatus.CANCELLED);
      expect(ms).toBeGreaterThanOrEqual(250);
      expect(ms).toBeLessThan(3000);
    });

    it("returns the finished ones after about the timeout", async () => {
      const { store } = await openStore(def, { realClock: true });
      const done = await startRollout(store);
      const pending = await startRollout(store);
      const waiting = timed(() => store.waitForRollouts({ rolloutIds: [pending.rolloutId, done.rolloutId], timeoutSeconds: 0.4 }));
      await sleep(100);
      await store.updateAttempt({ rolloutId: done.rolloutId, attemptId: done.attemptId, status: AttemptStatus.SUCCEEDED });
      const { ms, value } = await waiting;
      expect(ids(value.rollouts)).toEqual([done.rolloutId]);
      expect(ms).toBeGreaterThanOrEqual(350);
      expect(ms).toBeLessThan(2000);
    });

    it("times out with nothing when nothing finishes", async () => {
      const { store } = await openStore(def, { realClock: true });
      const [r] = await enqueueN(store, 1);
      const { ms, value } = await timed(() => store.waitForRollouts({ rolloutIds: [r!.rolloutId], timeoutSeconds: 0.2 }));
      expect(value.rollouts).toEqual([]);
      expect(ms).toBeGreaterThanOrEqual(150);
      expect(ms).toBeLessThan(1500);
      expect((await store.getRollout({ rolloutId: r!.rolloutId })).status).toBe(RolloutStatus.QUEUING);
    });

    it("timeout 0 returns at once with the already finished ones, in input order", async () => {
      const { store } = await openStore(def, { realClock: true });
      const [a, b, c] = ids(await enqueueN(store, 3));
      await store.updateRollout({ rolloutId: c!, status: RolloutStatus.SUCCEEDED });
      await store.updateRollout({ rolloutId: a!, status: RolloutStatus.FAILED });
      const { ms, value } = await timed(() => store.waitForRollouts({ rolloutIds: [c!, b!, a!], timeoutSeconds: 0 }));
      expect(ids(value.rollouts)).toEqual([c, a]);
      expect(ms).toBeLessThan(500);
      const neg = await store.waitForRollouts({ rolloutIds: [b!], timeoutSeconds: -1 });
      expect(neg.rollouts).toEqual([]);
    });

    it("returns at once when every rollout is already finished", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId, attemptId } = await startRollout(store);
      await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
      const { ms, value } = await timed(() => store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 30 }));
      expect(ids(value.rollouts)).toEqual([rolloutId]);
      expect(value.rollouts[0]!.latestAttempt?.status).toBe(AttemptStatus.SUCCEEDED);
      expect(ms).toBeLessThan(500);
    });

    it("five concurrent waiters on one rollout all wake", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const waiters = Array.from({ length: 5 }, () => store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 10 }));
      await sleep(100);
      await store.updateRollout({ rolloutId, status: RolloutStatus.SUCCEEDED });
      const { ms, value } = await timed(() => Promise.all(waiters));
      for (const res of value) expect(ids(res.rollouts)).toEqual([rolloutId]);
      expect(ms).toBeLessThan(3000);
    });

    it("three rollouts finishing at different times are all collected", async () => {
      const { store } = await openStore(def, { realClock: true });
      const rs = [await startRollout(store), await startRollout(store), await startRollout(store)];
      const waiting = store.waitForRollouts({ rolloutIds: rs.map((r) => r.rolloutId), timeoutSeconds: 10 });
      for (const r of [rs[2]!, rs[0]!, rs[1]!]) {
        await sleep(50);
        await store.updateAttempt({ rolloutId: r.rolloutId, attemptId: r.attemptId, status: AttemptStatus.SUCCEEDED });
      }
      expect(ids((await waiting).rollouts)).toEqual(rs.map((r) => r.rolloutId));
    });

    it("a rollout that fails with a retry left is not finished", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId, attemptId } = await startRollout(store, {
        config: { maxAttempts: 2, retryCondition: [AttemptStatus.FAILED] },
      });
      const waiting = store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 0.4 });
      await sleep(50);
      await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.FAILED });
      expect((await waiting).rollouts).toEqual([]);
    });

    it("an AbortSignal ends the wait early", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const ac = new AbortController();
      const p = timed(() => settleAborted(store.waitForRollouts({ rolloutIds: [rolloutId] }, { signal: ac.signal })));
      await sleep(100);
      ac.abort();
      const { ms } = await p;
      expect(ms).toBeLessThan(2000);
      expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.PREPARING);
    });

    it("an already aborted signal does not wait", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const ac = new AbortController();
      ac.abort();
      const { ms } = await timed(() =>
        settleAborted(store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 30 }, { signal: ac.signal })),
      );
      expect(ms).toBeLessThan(1000);
    });

    it("the caller's timeoutMs ends the wait", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const { ms } = await timed(() =>
        withTimeout(settleAborted(store.waitForRollouts({ rolloutIds: [rolloutId], timeoutSeconds: 30 }, { timeoutMs: 200 })), 3000),
      );
      expect(ms).toBeLessThan(2000);
    });

    it("an unknown id is NOT_FOUND", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      await expectCode(
        store.waitForRollouts({ rolloutIds: [rolloutId, "ro-ffffffffffff"], timeoutSeconds: 0.1 }),
        Code.NotFound,
        "ro-ffffffffffff",
      );
    });

    it("closing the store ends pending waits", async () => {
      const { store } = await openStore(def, { realClock: true });
      const { rolloutId } = await startRollout(store);
      const waiting = store.waitForRollouts({ rolloutIds: [rolloutId] }).then(
        () => "resolved",
        () => "rejected",
      );
      await sleep(50);
      const { ms, value } = await timed(async () => {
        await withTimeout(store.close(), 3000);
        return withTimeout(waiting, 3000);
      });
      expect(["resolved", "rejected"]).toContain(value);
      expect(ms).toBeLessThan(2000);
    });
  });
});
