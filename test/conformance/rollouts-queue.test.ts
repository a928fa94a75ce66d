/** Rollout creation, the FIFO queue, attempts numbering (reference §10.1 "creation", "Queue", "Attempts"). */
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutMode, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { enqueueN, ids, json, openStore, spec, startRollout, unjson } from "./harness.js";

describe.each(backends)("rollouts and queue [$name]", (def) => {
  it("enqueue creates a queuing rollout with defaults", async () => {
    const { store, clock } = await openStore(def);
    const [r] = (await store.enqueueRollouts({ rollouts: [{ input: json({ q: "2+2" }) }] })).rollouts;
    expect(r!.rolloutId).toMatch(/^ro-[0-9a-f]{12}$/);
    expect(r!.status).toBe(RolloutStatus.QUEUING);
    expect(r!.startTime).toBe(clock.t);
    expect(r!.endTime).toBeUndefined();
    expect(unjson(r!.input)).toEqual({ q: "2+2" });
    expect(r!.mode).toBe(RolloutMode.UNSPECIFIED);
    expect(r!.metadata).toEqual({});
    expect(r!.config?.maxAttempts).toBe(1);
    expect(r!.config?.retryCondition).toEqual([]);
    expect(r!.resourcesId).toBe("");
    expect(r!.groupId).toBe("");
    expect(r!.latestAttempt).toBeUndefined();
    const stored = await store.getRollout({ rolloutId: r!.rolloutId });
    expect(stored).toEqual(r);
  });

  it("enqueue preserves input, mode, metadata, group and config", async () => {
    const { store } = await openStore(def);
    const config = { timeoutSeconds: 12, maxAttempts: 3, retryCondition: [AttemptStatus.TIMEOUT] };
    const [r] = (
      await store.enqueueRollouts({
        rollouts: [spec([1, "two", { three: 3 }, null], { mode: RolloutMode.VAL, metadata: { tag: "x" }, groupId: "g1", config })],
      })
    ).rollouts;
    for (const got of [r!, await store.getRollout({ rolloutId: r!.rolloutId })]) {
      expect(unjson(got.input)).toEqual([1, "two", { three: 3 }, null]);
      expect(got.mode).toBe(RolloutMode.VAL);
      expect(got.metadata).toEqual({ tag: "x" });
      expect(got.groupId).toBe("g1");
      expect(got.config?.timeoutSeconds).toBe(12);
      expect(got.config?.unresponsiveSeconds).toBeUndefined();
      expect(got.config?.maxAttempts).toBe(3);
      expect(got.config?.retryCondition).toEqual([AttemptStatus.TIMEOUT]);
    }
  });

  it.each([
    ["null", null],
    ["a number", 3.25],
    ["a string", "héllo ✓ 𝄞"],
    ["a boolean", false],
    ["an empty object", {}],
    ["an empty list", []],
    ["nested values", { a: [1, { b: [true, null, "x"] }], "key with spaces": { "": 0 } }],
  ])("input %s round-trips", async (_name, input) => {
    const { store } = await openStore(def);
    const [r] = (await store.enqueueRollouts({ rollouts: [{ input: json(input) }] })).rollouts;
    expect(unjson(r!.input)).toEqual(input);
    expect(unjson((await store.getRollout({ rolloutId: r!.rolloutId })).input)).toEqual(input);
    const [d] = (await store.dequeueRollouts({})).rollouts;
    expect(unjson(d!.input)).toEqual(input);
  });

  it("metadata round-trips nested JSON", async () => {
    const { store } = await openStore(def);
    const metadata = { n: 1.5, s: "ü", b: true, nil: null, list: [1, "two", { three: [] }], obj: { deep: { x: {} } } };
    const [r] = (await store.enqueueRollouts({ rollouts: [spec({}, { metadata })] })).rollouts;
    expect((await store.getRollout({ rolloutId: r!.rolloutId })).metadata).toEqual(metadata);
  });

  it("a JSON key named __proto__ is kept as data, in metadata and input, read back and claimed", async () => {
    const { store } = await openStore(def);
    const metadata = JSON.parse('{"__proto__": {"x": 1}, "a": "m"}');
    const input = JSON.parse('{"__proto__": [1, 2], "b": true}');
    const [r] = (await store.enqueueRollouts({ rollouts: [spec(input, { metadata })] })).rollouts;
    for (const got of [await store.getRollout({ rolloutId: r!.rolloutId }), (await store.dequeueRollouts({})).rollouts[0]!]) {
      expect(Object.keys(got.metadata!)).toEqual(["__proto__", "a"]);
      expect(JSON.stringify(got.metadata)).toBe('{"__proto__":{"x":1},"a":"m"}');
      expect(Object.getPrototypeOf(got.metadata)).toBe(Object.prototype);
      expect(JSON.stringify(unjson(got.input))).toBe('{"__proto__":[1,2],"b":true}');
    }
  });

  it("enqueue of many rollouts keeps their order and they dequeue in the same order", async () => {
    const { store } = await openStore(def);
    const modes = [RolloutMode.TRAIN, RolloutMode.VAL, RolloutMode.TEST];
    const rollouts = (
      await store.enqueueRollouts({
        rollouts: modes.map((mode, i) => spec({ i }, { mode, metadata: { i }, config: { maxAttempts: i + 1 } })),
      })
    ).rollouts;
    expect(rollouts.map((r) => unjson(r.input))).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(rollouts.map((r) => r.mode)).toEqual(modes);
    expect(rollouts.map((r) => r.metadata)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(rollouts.map((r) => r.config?.maxAttempts)).toEqual([1, 2, 3]);
    expect(new Set(ids(rollouts)).size).toBe(3);
    const out = [];
    for (let i = 0; i < 3; i++) out.push(...(await store.dequeueRollouts({})).rollouts);
    expect(ids(out)).toEqual(ids(rollouts));
  });

  it("dequeues in FIFO order across enqueue calls, each claimed rollout preparing", async () => {
    const { store } = await openStore(def);
    const enqueued = [];
    for (let i = 0; i < 5; i++) enqueued.push(...(await enqueueN(store, 1)));
    const got = [];
    for (let i = 0; i < 5; i++) {
      const [r] = (await store.dequeueRollouts({})).rollouts;
      expect(r!.status).toBe(RolloutStatus.PREPARING);
      got.push(r!);
    }
    expect(ids(got)).toEqual(ids(enqueued));
  });

  it("dequeue on an empty queue returns nothing, repeatedly", async () => {
    const { store } = await openStore(def);
    for (let i = 0; i < 3; i++) expect((await store.dequeueRollouts({ limit: 5 })).rollouts).toEqual([]);
  });

  it("dequeue claims one by default and none with limit 0", async () => {
    const { store } = await openStore(def);
    const rs = await enqueueN(store, 3);
    expect((await store.dequeueRollouts({ limit: 0 })).rollouts).toEqual([]);
    expect((await store.getStatistics({})).queueLength).toBe(3);
    expect(ids((await store.dequeueRollouts({})).rollouts)).toEqual([rs[0]!.rolloutId]);
    expect(ids((await store.dequeueRollouts({})).rollouts)).toEqual([rs[1]!.rolloutId]);
  });

  it("dequeue with a limit claims up to limit, binding the worker to each attempt", async () => {
    const { store } = await openStore(def);
    const rs = await enqueueN(store, 4);
    const first = (await store.dequeueRollouts({ limit: 2, workerId: "w1" })).rollouts;
    expect(ids(first)).toEqual(ids(rs.slice(0, 2)));
    for (const r of first) expect(r.latestAttempt?.workerId).toBe("w1");
    const second = (await store.dequeueRollouts({ limit: 5, workerId: "w1" })).rollouts;
    expect(ids(second)).toEqual(ids(rs.slice(2)));
    expect((await store.dequeueRollouts({ limit: 1 })).rollouts).toEqual([]);
  });

  it("dequeue creates attempt #1 preparing and returns it as the latest attempt", async () => {
    const { store, clock } = await openStore(def);
    const [queued] = await enqueueN(store, 1);
    clock.advance(3);
    const [r] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
    const a = r!.latestAttempt!;
    expect(a.attemptId).toMatch(/^at-[0-9a-f]{8}$/);
    expect(a.rolloutId).toBe(queued!.rolloutId);
    expect(a.sequenceId).toBe(1);
    expect(a.status).toBe(AttemptStatus.PREPARING);
    expect(a.startTime).toBe(clock.t);
    expect(a.endTime).toBeUndefined();
    expect(a.workerId).toBe("w");
    expect(r!.startTime).toBe(queued!.startTime);
    const stored = await store.getRollout({ rolloutId: queued!.rolloutId });
    expect(stored.status).toBe(RolloutStatus.PREPARING);
    expect(stored.latestAttempt).toEqual(a);
    expect((await store.getLatestAttempt({ rolloutId: queued!.rolloutId })).attempt).toEqual(a);
  });

  it("dequeue skips rollouts that are no longer queuing", async () => {
    const { store } = await openStore(def);
    const [r1, r2, r3] = await enqueueN(store, 3);
    await store.updateRollout({ rolloutId: r1!.rolloutId, status: RolloutStatus.SUCCEEDED });
    await store.updateRollout({ rolloutId: r2!.rolloutId, status: RolloutStatus.FAILED });
    const got = (await store.dequeueRollouts({ limit: 1 })).rollouts;
    expect(ids(got)).toEqual([r3!.rolloutId]);
    expect(got[0]!.status).toBe(RolloutStatus.PREPARING);
    expect((await store.dequeueRollouts({})).rollouts).toEqual([]);
    expect((await store.getRollout({ rolloutId: r1!.rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
    expect((await store.getRollout({ rolloutId: r2!.rolloutId })).status).toBe(RolloutStatus.FAILED);
    expect((await store.queryAttempts({ rolloutId: r1!.rolloutId })).attempts).toEqual([]);
    expect((await store.queryAttempts({ rolloutId: r2!.rolloutId })).attempts).toEqual([]);
  });

  it("dequeue skips a queued rollout that was started by StartAttempt", async () => {
    const { store } = await openStore(def);
    const [r1, r2] = await enqueueN(store, 2);
    const started = await store.startAttempt({ rolloutId: r1!.rolloutId });
    expect(started.status).toBe(RolloutStatus.PREPARING);
    expect(started.latestAttempt?.sequenceId).toBe(1);
    expect(ids((await store.dequeueRollouts({ limit: 10 })).rollouts)).toEqual([r2!.rolloutId]);
    expect((await store.queryAttempts({ rolloutId: r1!.rolloutId })).attempts).toHaveLength(1);
  });

  it("StartRollout creates a preparing rollout with attempt #1 bound to the worker, bypassing the queue", async () => {
    const { store, clock } = await openStore(def);
    const r = await store.startRollout({ rollout: spec({ x: 1 }), workerId: "w9" });
    expect(r.rolloutId).toMatch(/^ro-[0-9a-f]{12}$/);
    expect(r.status).toBe(RolloutStatus.PREPARING);
    expect(r.startTime).toBe(clock.t);
    expect(r.latestAttempt?.attemptId).toMatch(/^at-[0-9a-f]{8}$/);
    expect(r.latestAttempt?.sequenceId).toBe(1);
    expect(r.latestAttempt?.status).toBe(AttemptStatus.PREPARING);
    expect(r.latestAttempt?.workerId).toBe("w9");
    expect((await store.dequeueRollouts({ limit: 10 })).rollouts).toEqual([]);
    const q = await store.queryRollouts({ statusIn: [RolloutStatus.PREPARING] });
    expect(ids(q.rollouts)).toEqual([r.rolloutId]);
    expect(q.rollouts[0]!.latestAttempt).toEqual(r.latestAttempt);
    expect((await store.queryAttempts({ rolloutId: r.rolloutId })).attempts).toHaveLength(1);
  });

  it("StartRollout keeps its config", async () => {
    const { store } = await openStore(def);
    const config = { unresponsiveSeconds: 5, maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] };
    const { rolloutId } = await startRollout(store, { config });
    const got = await store.getRollout({ rolloutId });
    expect(got.config?.unresponsiveSeconds).toBe(5);
    expect(got.config?.timeoutSeconds).toBeUndefined();
    expect(got.config?.maxAttempts).toBe(2);
    expect(got.config?.retryCondition).toEqual([AttemptStatus.UNRESPONSIVE]);
  });

  it("StartAttempt numbers attempts n+1 and makes the rollout preparing", async () => {
    const { store } = await openStore(def);
    const [r] = await enqueueN(store, 1);
    await store.dequeueRollouts({});
    const a2 = await store.startAttempt({ rolloutId: r!.rolloutId });
    const a3 = await store.startAttempt({ rolloutId: r!.rolloutId, workerId: "w" });
    expect(a2.latestAttempt?.sequenceId).toBe(2);
    expect(a3.latestAttempt?.sequenceId).toBe(3);
    expect(a3.latestAttempt?.workerId).toBe("w");
    expect(a3.status).toBe(RolloutStatus.PREPARING);
    const attempts = (await store.queryAttempts({ rolloutId: r!.rolloutId })).attempts;
    expect(attempts.map((a) => a.sequenceId)).toEqual([1, 2, 3]);
    expect(new Set(attempts.map((a) => a.attemptId)).size).toBe(3);
    expect((await store.getLatestAttempt({ rolloutId: r!.rolloutId })).attempt?.attemptId).toBe(a3.latestAttempt?.attemptId);
  });

  it("StartAttempt ignores max_attempts", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store, { config: { maxAttempts: 2 } });
    await store.startAttempt({ rolloutId });
    const third = await store.startAttempt({ rolloutId });
    expect(third.latestAttempt?.sequenceId).toBe(3);
    expect((await store.queryAttempts({ rolloutId })).page?.total).toBe(3);
  });

  it("UpdateRollout to requeuing re-enqueues; the next dequeue creates attempt #2", async () => {
    const { store } = await openStore(def);
    const [r] = await enqueueN(store, 1);
    await store.dequeueRollouts({});
    const updated = await store.updateRollout({ rolloutId: r!.rolloutId, status: RolloutStatus.REQUEUING });
    expect(updated.status).toBe(RolloutStatus.REQUEUING);
    const [again] = (await store.dequeueRollouts({})).rollouts;
    expect(again?.rolloutId).toBe(r!.rolloutId);
    expect(again?.status).toBe(RolloutStatus.PREPARING);
    expect(again?.latestAttempt?.sequenceId).toBe(2);
    expect(again?.latestAttempt?.status).toBe(AttemptStatus.PREPARING);
  });

  it("UpdateRollout to queuing re-enqueues too", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    await store.updateRollout({ rolloutId, status: RolloutStatus.QUEUING });
    const [again] = (await store.dequeueRollouts({})).rollouts;
    expect(again?.rolloutId).toBe(rolloutId);
    expect(again?.latestAttempt?.sequenceId).toBe(2);
  });

  it("re-enqueueing a rollout that is already queued does not queue it twice", async () => {
    const { store } = await openStore(def);
    const { rolloutId } = await startRollout(store);
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    await store.updateRollout({ rolloutId, status: RolloutStatus.QUEUING });
    expect((await store.getStatistics({})).queueLength).toBe(1);
    expect((await store.dequeueRollouts({ limit: 10 })).rollouts).toHaveLength(1);
    expect((await store.queryAttempts({ rolloutId })).attempts).toHaveLength(2);
  });

  it("GetRollout attaches the latest attempt only when there is one", async () => {
    const { store } = await openStore(def);
    const [queued] = await enqueueN(store, 1);
    expect((await store.getRollout({ rolloutId: queued!.rolloutId })).latestAttempt).toBeUndefined();
    expect((await store.getLatestAttempt({ rolloutId: queued!.rolloutId })).attempt).toBeUndefined();
    const { rolloutId } = await startRollout(store);
    const second = await store.startAttempt({ rolloutId });
    const got = await store.getRollout({ rolloutId });
    expect(got.latestAttempt?.attemptId).toBe(second.latestAttempt?.attemptId);
    expect(got.latestAttempt?.sequenceId).toBe(2);
    const q = await store.queryRollouts({ rolloutIdIn: [rolloutId] });
    expect(q.rollouts[0]!.latestAttempt?.sequenceId).toBe(2);
  });

  it("QueryAttempts and GetLatestAttempt follow the attempts in sequence order", async () => {
    const { store } = await openStore(def);
    const [r] = await enqueueN(store, 1);
    const rolloutId = r!.rolloutId;
    expect((await store.queryAttempts({ rolloutId })).attempts).toEqual([]);
    expect((await store.getLatestAttempt({ rolloutId })).attempt).toBeUndefined();
    await store.dequeueRollouts({});
    let attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts.map((a) => [a.sequenceId, a.status])).toEqual([[1, AttemptStatus.PREPARING]]);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.sequenceId).toBe(1);
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    await store.dequeueRollouts({});
    attempts = (await store.queryAttempts({ rolloutId })).attempts;
    expect(attempts.map((a) => a.sequenceId)).toEqual([1, 2]);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.sequenceId).toBe(2);
  });

  it("UpdateRollout replaces the given fields and leaves the others", async () => {
    const { store } = await openStore(def);
    const res = await store.addResources({ resources: { a: { kind: { case: "json", value: json(1) } } } });
    const [r] = await enqueueN(store, 1, { metadata: { keep: false }, groupId: "g" });
    const updated = await store.updateRollout({
      rolloutId: r!.rolloutId,
      input: json("new input"),
      mode: RolloutMode.TEST,
      resourcesId: res.resourcesId,
      status: RolloutStatus.RUNNING,
      config: { timeoutSeconds: 7, maxAttempts: 4, retryCondition: [AttemptStatus.FAILED] },
      metadata: { k: "v" },
    });
    const got = await store.getRollout({ rolloutId: r!.rolloutId });
    for (const x of [updated, got]) {
      expect(unjson(x.input)).toBe("new input");
      expect(x.mode).toBe(RolloutMode.TEST);
      expect(x.resourcesId).toBe(res.resourcesId);
      expect(x.status).toBe(RolloutStatus.RUNNING);
      expect(x.config?.timeoutSeconds).toBe(7);
      expect(x.config?.maxAttempts).toBe(4);
      expect(x.config?.retryCondition).toEqual([AttemptStatus.FAILED]);
      expect(x.metadata).toEqual({ k: "v" });
      expect(x.groupId).toBe("g");
      expect(x.startTime).toBe(r!.startTime);
    }
    // An update without fields changes nothing.
    const same = await store.updateRollout({ rolloutId: r!.rolloutId });
    expect(same).toEqual(got);
  });

  it("configs are stored per rollout", async () => {
    const { store } = await openStore(def);
    const [a, b] = await enqueueN(store, 2, { config: { maxAttempts: 2 } });
    await store.updateRollout({ rolloutId: a!.rolloutId, config: { maxAttempts: 5, timeoutSeconds: 1 } });
    expect((await store.getRollout({ rolloutId: a!.rolloutId })).config?.maxAttempts).toBe(5);
    const bc = (await store.getRollout({ rolloutId: b!.rolloutId })).config;
    expect(bc?.maxAttempts).toBe(2);
    expect(bc?.timeoutSeconds).toBeUndefined();
  });

  it("UpdateRollout to a finished status sets end_time", async () => {
    const { store, clock } = await openStore(def);
    const [a, b, c] = await enqueueN(store, 3);
    clock.advance(2);
    for (const [r, s] of [
      [a!, RolloutStatus.SUCCEEDED],
      [b!, RolloutStatus.FAILED],
      [c!, RolloutStatus.CANCELLED],
    ] as const) {
      const u = await store.updateRollout({ rolloutId: r.rolloutId, status: s });
      expect(u.status).toBe(s);
      expect(u.endTime).toBe(clock.t);
    }
    expect((await store.dequeueRollouts({ limit: 3 })).rollouts).toEqual([]);
  });
});
