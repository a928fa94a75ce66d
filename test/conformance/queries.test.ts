/**
 * Queries: filters (AND/OR, contains, in), sorting (ties, unset times), pagination edge cases, statistics
 * (reference §2.3, §10.1 "Query rollouts / attempts", "Workers", §10.2 collection queries).
 */
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AttemptStatus, FilterLogic, RolloutStatus, SortOrder, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { sortableFields } from "../../src/store/backend.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, expectRejectedUnchanged, ids, openStore, startRollout } from "./harness.js";

/** r1 preparing (dequeued), r2 failed, r3 queuing. */
async function threeRollouts(store: Store) {
  const [r1, r2, r3] = await enqueueN(store, 3);
  await store.updateRollout({ rolloutId: r2!.rolloutId, status: RolloutStatus.FAILED });
  await store.dequeueRollouts({});
  return [r1!.rolloutId, r2!.rolloutId, r3!.rolloutId] as const;
}

/** Workers: alpha busy, beta idle, gamma-cpu unknown (in that insertion order). */
async function threeWorkers(store: Store) {
  await enqueueN(store, 1);
  await store.dequeueRollouts({ workerId: "alpha-worker" });
  await store.dequeueRollouts({ workerId: "beta-worker" });
  await store.updateWorker({ workerId: "gamma-cpu-worker" });
}
const wids = (r: { workers: Array<{ workerId: string }> }) => r.workers.map((w) => w.workerId);

describe.each(backends)("queries [$name]", (def) => {
  describe("rollouts", () => {
    it("by status, and no filter returns everything", async () => {
      const { store } = await openStore(def);
      const [r1, r2, r3] = await threeRollouts(store);
      const all = await store.queryRollouts({});
      expect(ids(all.rollouts)).toEqual([r1, r2, r3]);
      expect(all.page?.total).toBe(3);
      expect(ids((await store.queryRollouts({ statusIn: [RolloutStatus.QUEUING] })).rollouts)).toEqual([r3]);
      expect(ids((await store.queryRollouts({ statusIn: [RolloutStatus.PREPARING] })).rollouts)).toEqual([r1]);
      const finished = await store.queryRollouts({ statusIn: [RolloutStatus.FAILED, RolloutStatus.SUCCEEDED] });
      expect(ids(finished.rollouts)).toEqual([r2]);
      expect((await store.queryRollouts({ statusIn: [RolloutStatus.RUNNING] })).rollouts).toEqual([]);
    });

    it("by ids, contains and group", async () => {
      const { store } = await openStore(def);
      const [a, b] = await enqueueN(store, 2, { groupId: "g" });
      const [c] = await enqueueN(store, 1, { groupId: "h" });
      const [r1, r2, r3] = [a!.rolloutId, b!.rolloutId, c!.rolloutId];
      expect(ids((await store.queryRollouts({ rolloutIdIn: [r3, r1] })).rollouts)).toEqual([r1, r3]);
      expect(ids((await store.queryRollouts({ rolloutIdIn: [r2] })).rollouts)).toEqual([r2]);
      expect((await store.queryRollouts({ rolloutIdIn: ["ro-000000000000"] })).rollouts).toEqual([]);
      expect(ids((await store.queryRollouts({ rolloutIdContains: r2.slice(-6) })).rollouts)).toEqual([r2]);
      expect(ids((await store.queryRollouts({ rolloutIdContains: "ro-" })).rollouts)).toEqual([r1, r2, r3]);
      expect(ids((await store.queryRollouts({ groupId: "g" })).rollouts)).toEqual([r1, r2]);
      expect(ids((await store.queryRollouts({ groupId: "h" })).rollouts)).toEqual([r3]);
      expect((await store.queryRollouts({ groupId: "none" })).rollouts).toEqual([]);
      await store.dequeueRollouts({});
      const combined = await store.queryRollouts({ rolloutIdIn: [r1, r2], statusIn: [RolloutStatus.QUEUING] });
      expect(ids(combined.rollouts)).toEqual([r2]);
    });

    it("AND requires every condition; OR any", async () => {
      const { store } = await openStore(def);
      const [r1, r2, r3] = await threeRollouts(store);
      const and = await store.queryRollouts({
        statusIn: [RolloutStatus.FAILED],
        rolloutIdContains: r3.slice(-8),
      });
      expect(and.rollouts).toEqual([]);
      expect(and.page?.total).toBe(0);
      const or = await store.queryRollouts({
        statusIn: [RolloutStatus.FAILED],
        rolloutIdContains: r3.slice(-8),
        filterLogic: FilterLogic.OR,
      });
      expect(ids(or.rollouts)).toEqual([r2, r3]);
      const or2 = await store.queryRollouts({
        statusIn: [RolloutStatus.SUCCEEDED],
        rolloutIdIn: [r1],
        filterLogic: FilterLogic.OR,
      });
      expect(ids(or2.rollouts)).toEqual([r1]);
      const orGroup = await store.queryRollouts({ groupId: "nope", rolloutIdIn: [r3], filterLogic: FilterLogic.OR });
      expect(ids(orGroup.rollouts)).toEqual([r3]);
    });

    it("OR filter with sort and pagination", async () => {
      const { store } = await openStore(def);
      const rs = ids(await enqueueN(store, 4));
      await store.updateRollout({ rolloutId: rs[0]!, status: RolloutStatus.FAILED });
      await store.updateRollout({ rolloutId: rs[2]!, status: RolloutStatus.FAILED });
      const matches = [rs[0]!, rs[1]!, rs[2]!].sort();
      const res = await store.queryRollouts({
        statusIn: [RolloutStatus.FAILED],
        rolloutIdIn: [rs[1]!],
        filterLogic: FilterLogic.OR,
        page: { sortBy: "rollout_id", limit: 2, offset: 1 },
      });
      expect(ids(res.rollouts)).toEqual(matches.slice(1, 3));
      expect(res.page?.total).toBe(3);
    });

    it("sorts by id in both directions, with limit and offset", async () => {
      const { store } = await openStore(def);
      const rs = ids(await enqueueN(store, 4));
      const asc = [...rs].sort();
      const desc = [...asc].reverse();
      const d = await store.queryRollouts({ page: { sortBy: "rollout_id", sortOrder: SortOrder.DESC, limit: 2 } });
      expect(ids(d.rollouts)).toEqual(desc.slice(0, 2));
      expect(d.page?.total).toBe(4);
      const a = await store.queryRollouts({ page: { sortBy: "rollout_id", limit: 1, offset: 1 } });
      expect(ids(a.rollouts)).toEqual([asc[1]]);
      expect(a.page?.total).toBe(4);
      expect(a.page?.limit).toBe(1);
      expect(a.page?.offset).toBe(1);
    });

    it("ties keep insertion order in both directions", async () => {
      const { store } = await openStore(def);
      const rs = ids(await enqueueN(store, 5)); // same fake time: all start_time ties
      const asc = await store.queryRollouts({ page: { sortBy: "start_time" } });
      expect(ids(asc.rollouts)).toEqual(rs);
      const desc = await store.queryRollouts({ page: { sortBy: "start_time", sortOrder: SortOrder.DESC } });
      expect(ids(desc.rollouts)).toEqual(rs);
      const byGroup = await store.queryRollouts({ page: { sortBy: "group_id", sortOrder: SortOrder.DESC } });
      expect(ids(byGroup.rollouts)).toEqual(rs);
    });

    it("sorts by time, unset times as +infinity", async () => {
      const { store, clock } = await openStore(def);
      const [a, b, c, d] = ids(await enqueueN(store, 4));
      clock.advance(5);
      await store.updateRollout({ rolloutId: c!, status: RolloutStatus.SUCCEEDED }); // end t+5
      clock.advance(5);
      await store.updateRollout({ rolloutId: a!, status: RolloutStatus.FAILED }); // end t+10
      const asc = await store.queryRollouts({ page: { sortBy: "end_time" } });
      expect(ids(asc.rollouts)).toEqual([c, a, b, d]);
      const desc = await store.queryRollouts({ page: { sortBy: "end_time", sortOrder: SortOrder.DESC } });
      expect(ids(desc.rollouts)).toEqual([b, d, a, c]);
    });

    it("sorts by start_time across different times", async () => {
      const { store, clock } = await openStore(def);
      const first = ids(await enqueueN(store, 1));
      clock.advance(-10); // an earlier clock reading for the second rollout
      const second = ids(await enqueueN(store, 1));
      const asc = await store.queryRollouts({ page: { sortBy: "start_time" } });
      expect(ids(asc.rollouts)).toEqual([...second, ...first]);
      const dflt = await store.queryRollouts({});
      expect(ids(dflt.rollouts)).toEqual([...first, ...second]);
    });
  });

  describe("pagination", () => {
    it("limit absent or -1 returns all; 0 returns none but counts", async () => {
      const { store } = await openStore(def);
      const rs = ids(await enqueueN(store, 3));
      expect(ids((await store.queryRollouts({ page: {} })).rollouts)).toEqual(rs);
      const all = await store.queryRollouts({ page: { limit: -1 } });
      expect(ids(all.rollouts)).toEqual(rs);
      expect(all.page?.total).toBe(3);
      const none = await store.queryRollouts({ page: { limit: 0 } });
      expect(none.rollouts).toEqual([]);
      expect(none.page?.total).toBe(3);
      const unbounded = await store.queryRollouts({ page: { limit: -1, offset: 1, sortBy: "rollout_id" } });
      expect(ids(unbounded.rollouts)).toEqual([...rs].sort().slice(1));
    });

    it("an offset past the end returns nothing, with the total", async () => {
      const { store } = await openStore(def);
      await enqueueN(store, 2);
      for (const offset of [2, 10]) {
        const res = await store.queryRollouts({ page: { offset } });
        expect(res.rollouts).toEqual([]);
        expect(res.page?.total).toBe(2);
        expect(res.page?.offset).toBe(offset);
      }
    });

    it("windows over filtered results", async () => {
      const { store } = await openStore(def);
      const rs = ids(await enqueueN(store, 6));
      for (const r of rs.slice(0, 3)) await store.updateRollout({ rolloutId: r, status: RolloutStatus.FAILED });
      const cases: Array<[number, number, string[]]> = [
        [1, 0, rs.slice(0, 1)],
        [2, 1, rs.slice(1, 3)],
        [-1, 1, rs.slice(1, 3)],
        [10, 0, rs.slice(0, 3)],
        [0, 0, []],
        [1, 10, []],
      ];
      for (const [limit, offset, want] of cases) {
        const res = await store.queryRollouts({ statusIn: [RolloutStatus.FAILED], page: { limit, offset } });
        expect(ids(res.rollouts), `limit ${limit} offset ${offset}`).toEqual(want);
        expect(res.page?.total).toBe(3);
      }
    });

    it("attempts: default sequence order, sort desc, limit, offset", async () => {
      const { store } = await openStore(def);
      const { rolloutId } = await startRollout(store);
      await store.startAttempt({ rolloutId });
      await store.startAttempt({ rolloutId });
      const seq = (r: { attempts: Array<{ sequenceId: number }> }) => r.attempts.map((a) => a.sequenceId);
      expect(seq(await store.queryAttempts({ rolloutId }))).toEqual([1, 2, 3]);
      expect(seq(await store.queryAttempts({ rolloutId, page: { sortBy: "sequence_id", sortOrder: SortOrder.DESC } }))).toEqual([3, 2, 1]);
      const w = await store.queryAttempts({
        rolloutId,
        page: { sortBy: "sequence_id", sortOrder: SortOrder.DESC, limit: 1, offset: 1 },
      });
      expect(seq(w)).toEqual([2]);
      expect(w.page?.total).toBe(3);
      const meta = await store.queryAttempts({ rolloutId, page: { limit: 1, offset: 1 } });
      expect(seq(meta)).toEqual([2]);
      expect(meta.page?.total).toBe(3);
      expect((await store.queryAttempts({ rolloutId, page: { offset: 10 } })).attempts).toEqual([]);
      const zero = await store.queryAttempts({ rolloutId, page: { limit: 0 } });
      expect(zero.attempts).toEqual([]);
      expect(zero.page?.total).toBe(3);
    });

    it("attempts sort by end_time with unset times last ascending", async () => {
      const { store, clock } = await openStore(def);
      const { rolloutId, attemptId: a1 } = await startRollout(store);
      const a2 = (await store.startAttempt({ rolloutId })).latestAttempt!.attemptId;
      const a3 = (await store.startAttempt({ rolloutId })).latestAttempt!.attemptId;
      clock.advance(1);
      await store.updateAttempt({ rolloutId, attemptId: a3, status: AttemptStatus.FAILED });
      clock.advance(1);
      await store.updateAttempt({ rolloutId, attemptId: a1, status: AttemptStatus.FAILED });
      const aids = (r: { attempts: Array<{ attemptId: string }> }) => r.attempts.map((a) => a.attemptId);
      expect(aids(await store.queryAttempts({ rolloutId, page: { sortBy: "end_time" } }))).toEqual([a3, a1, a2]);
      expect(aids(await store.queryAttempts({ rolloutId, page: { sortBy: "end_time", sortOrder: SortOrder.DESC } }))).toEqual([a2, a1, a3]);
    });
  });

  describe("workers", () => {
    it("filters by status and id substring, sorts and paginates", async () => {
      const { store } = await openStore(def);
      await threeWorkers(store);
      expect(wids(await store.queryWorkers({ statusIn: [WorkerStatus.BUSY] }))).toEqual(["alpha-worker"]);
      expect(wids(await store.queryWorkers({ statusIn: [WorkerStatus.IDLE, WorkerStatus.UNKNOWN] }))).toEqual([
        "beta-worker",
        "gamma-cpu-worker",
      ]);
      expect(wids(await store.queryWorkers({ workerIdContains: "beta" }))).toEqual(["beta-worker"]);
      expect(wids(await store.queryWorkers({ page: { sortBy: "worker_id", sortOrder: SortOrder.DESC } }))).toEqual([
        "gamma-cpu-worker",
        "beta-worker",
        "alpha-worker",
      ]);
      const w = await store.queryWorkers({
        page: { sortBy: "worker_id", sortOrder: SortOrder.DESC, limit: 1, offset: 1 },
      });
      expect(wids(w)).toEqual(["beta-worker"]);
      expect(w.page?.total).toBe(3);
    });

    it("AND vs OR of status and substring", async () => {
      const { store } = await openStore(def);
      await threeWorkers(store);
      expect((await store.queryWorkers({ statusIn: [WorkerStatus.BUSY], workerIdContains: "cpu" })).workers).toEqual([]);
      const or = await store.queryWorkers({
        statusIn: [WorkerStatus.BUSY],
        workerIdContains: "cpu",
        filterLogic: FilterLogic.OR,
        page: { sortBy: "worker_id" },
      });
      expect(wids(or)).toEqual(["alpha-worker", "gamma-cpu-worker"]);
      const and = await store.queryWorkers({
        statusIn: [WorkerStatus.BUSY],
        workerIdContains: "alpha",
        page: { sortBy: "worker_id", limit: 1 },
      });
      expect(wids(and)).toEqual(["alpha-worker"]);
    });

    it("sorts by heartbeat time with unset times as +infinity", async () => {
      const { store, clock } = await openStore(def);
      await threeWorkers(store); // only gamma has a heartbeat
      clock.advance(-5);
      await store.updateWorker({ workerId: "beta-worker" }); // earlier heartbeat
      const asc = await store.queryWorkers({ page: { sortBy: "last_heartbeat_time" } });
      expect(wids(asc)).toEqual(["beta-worker", "gamma-cpu-worker", "alpha-worker"]);
      const desc = await store.queryWorkers({ page: { sortBy: "last_heartbeat_time", sortOrder: SortOrder.DESC } });
      expect(wids(desc)).toEqual(["alpha-worker", "gamma-cpu-worker", "beta-worker"]);
    });
  });

  describe("contains", () => {
    it("is a case-sensitive, literal substring match", async () => {
      const { store } = await openStore(def);
      for (const id of ["Alpha_1", "alpha%2", "alphaX3", "beta"]) await store.updateWorker({ workerId: id });
      expect(wids(await store.queryWorkers({ workerIdContains: "alpha" }))).toEqual(["alpha%2", "alphaX3"]);
      expect(wids(await store.queryWorkers({ workerIdContains: "Alpha" }))).toEqual(["Alpha_1"]);
      expect(wids(await store.queryWorkers({ workerIdContains: "_" }))).toEqual(["Alpha_1"]);
      expect(wids(await store.queryWorkers({ workerIdContains: "%" }))).toEqual(["alpha%2"]);
      expect(wids(await store.queryWorkers({ workerIdContains: "a_1" }))).toEqual(["Alpha_1"]);
      expect(wids(await store.queryWorkers({ workerIdContains: "ALPHA" }))).toEqual([]);
      for (const id of ["res_a", "resXa", "RES%"]) {
        await store.updateResources({ resourcesId: id, resources: {}, createIfMissing: true });
      }
      const rid = (r: { resources: Array<{ resourcesId: string }> }) => r.resources.map((x) => x.resourcesId);
      expect(rid(await store.queryResources({ resourcesIdContains: "s_" }))).toEqual(["res_a"]);
      expect(rid(await store.queryResources({ resourcesIdContains: "res" }))).toEqual(["res_a", "resXa"]);
      expect(rid(await store.queryResources({ resourcesIdContains: "%" }))).toEqual(["RES%"]);
    });

    it("group_id is an exact match", async () => {
      const { store } = await openStore(def);
      const [a] = await enqueueN(store, 1, { groupId: "grp" });
      await enqueueN(store, 1, { groupId: "grp-2" });
      await enqueueN(store, 1, { groupId: "GRP" });
      expect(ids((await store.queryRollouts({ groupId: "grp" })).rollouts)).toEqual([a!.rolloutId]);
    });
  });

  it("sorts rollouts by status in enum order, ties in insertion order", async () => {
    const { store } = await openStore(def);
    const rs = ids(await enqueueN(store, 4));
    await store.updateRollout({ rolloutId: rs[0]!, status: RolloutStatus.FAILED }); // 4
    await store.updateRollout({ rolloutId: rs[2]!, status: RolloutStatus.RUNNING }); // 3
    const asc = await store.queryRollouts({ page: { sortBy: "status" } });
    expect(ids(asc.rollouts)).toEqual([rs[1], rs[3], rs[2], rs[0]]);
    const desc = await store.queryRollouts({ page: { sortBy: "status", sortOrder: SortOrder.DESC } });
    expect(ids(desc.rollouts)).toEqual([rs[0], rs[2], rs[1], rs[3]]);
  });

  describe("sort fields", () => {
    it.each([
      ["rollouts", (s: Store, sortBy: string) => s.queryRollouts({ page: { sortBy } })],
      ["attempts", (s: Store, sortBy: string) => s.queryAttempts({ rolloutId: "", page: { sortBy } })],
      ["workers", (s: Store, sortBy: string) => s.queryWorkers({ page: { sortBy } })],
      ["resources", (s: Store, sortBy: string) => s.queryResources({ page: { sortBy } })],
    ] as const)("an unknown sort field of %s is INVALID_ARGUMENT listing the allowed fields", async (table, q) => {
      const { store } = await openStore(def);
      const { rolloutId } = await startRollout(store);
      const query =
        table === "attempts"
          ? (sortBy: string) => store.queryAttempts({ rolloutId, page: { sortBy } })
          : (sortBy: string) => q(store, sortBy);
      const err = await expectRejectedUnchanged(store, () => query("no_such_field"), Code.InvalidArgument);
      expect(err.rawMessage).toContain("no_such_field");
      for (const f of sortableFields[table]) expect(err.rawMessage).toContain(f);
      // every listed field is accepted
      for (const f of sortableFields[table]) await query(f);
    });

    it("an unknown sort field of spans is INVALID_ARGUMENT listing the allowed fields", async () => {
      const { store } = await openStore(def);
      const { rolloutId, attemptId } = await startRollout(store);
      await addSpan(store, rolloutId, attemptId);
      const err = await expectRejectedUnchanged(
        store,
        () => store.querySpans({ rolloutId, page: { sortBy: "startTime" } }),
        Code.InvalidArgument,
        "startTime",
      );
      for (const f of sortableFields.spans) expect(err.rawMessage).toContain(f);
      for (const f of sortableFields.spans) await store.querySpans({ rolloutId, page: { sortBy: f } });
    });
  });

  describe("statistics", () => {
    it("counts rollouts, attempts, spans, resources, workers, queue and statuses", async () => {
      const { store, clock } = await openStore(def);
      const empty = await store.getStatistics({});
      expect(empty.backend).toBe(def.name);
      expect(empty.totalRollouts).toBe(0);
      expect(empty.queueLength).toBe(0);
      const { rolloutId, attemptId } = await startRollout(store);
      await addSpan(store, rolloutId, attemptId);
      await store.addResources({ resources: {} });
      await store.updateWorker({ workerId: "w" });
      await enqueueN(store, 3);
      clock.advance(5);
      const s = await store.getStatistics({});
      expect(s.backend).toBe(def.name);
      expect(s.totalRollouts).toBe(4);
      expect(s.totalAttempts).toBe(1);
      expect(s.totalSpans).toBe(1);
      expect(s.totalResources).toBe(1);
      expect(s.totalWorkers).toBe(1);
      expect(s.queueLength).toBe(3);
      expect(s.uptimeSeconds).toBeGreaterThanOrEqual(5);
      expect(s.uptimeSeconds).toBeGreaterThan(empty.uptimeSeconds);
      expect(s.rolloutsByStatus.ROLLOUT_STATUS_RUNNING).toBe(1);
      expect(s.rolloutsByStatus.ROLLOUT_STATUS_QUEUING).toBe(3);
      expect(s.rolloutsByStatus.ROLLOUT_STATUS_SUCCEEDED ?? 0).toBe(0);
      await store.dequeueRollouts({ limit: 2 });
      const after = await store.getStatistics({});
      expect(after.queueLength).toBe(1);
      expect(after.totalAttempts).toBe(3);
      expect(after.rolloutsByStatus.ROLLOUT_STATUS_PREPARING).toBe(2);
      expect(after.rolloutsByStatus.ROLLOUT_STATUS_QUEUING).toBe(1);
    });

    it("resource versions count once per snapshot id", async () => {
      const { store } = await openStore(def);
      const a = await store.addResources({ resources: {} });
      await store.updateResources({ resourcesId: a.resourcesId, resources: {} });
      await store.updateResources({ resourcesId: a.resourcesId, resources: {} });
      expect((await store.getStatistics({})).totalResources).toBe(1);
      expect((await store.queryResources({})).page?.total).toBe(1);
    });
  });
});
