import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type Attempt,
  AttemptSchema,
  AttemptStatus,
  AttributeValueSchema,
  ResourcesUpdateSchema,
  RolloutMode,
  RolloutSchema,
  RolloutStatus,
  type Span,
  SpanSchema,
  type Worker,
  WorkerSchema,
  WorkerStatus,
} from "../../src/gen/agl/v1/types_pb.js";
import { type AddSpansRequest, AddSpansRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import type { PageSpec, SpanFilter, StorageBackend, StorageTx, StoreEvent } from "../../src/store/backend.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { decodeKeepingSpans } from "../../src/store/span-wire.js";
import { RowCache, type RolloutSpans } from "../../src/store/backends/sqlite/sqlite-row-cache.js";
import { openSchema, SCHEMA_VERSION } from "../../src/store/backends/sqlite/sqlite-schema.js";
import { aggregates } from "../../src/store/backends/sqlite/sqlite-queries.js";
import { prepareStatements } from "../../src/store/backends/sqlite/sqlite-statements.js";
import { AGL_LLM_PROMPT_TOKEN_IDS, AGL_LLM_RESPONSE_TOKEN_IDS, GEN_AI_RESPONSE_ID, rewardValueKey } from "../../src/core/semconv.js";

/** Backends that must behave identically; the file-based tests below are SQLite's own. */
const backends: Array<{ name: string; make: () => StorageBackend }> = [
  { name: "sqlite", make: () => createSqliteBackend({ path: ":memory:" }) },
  { name: "memory", make: () => createMemoryBackend() },
];

const all: PageSpec = { descending: false, limit: -1, offset: 0 };
const page = (init: Partial<PageSpec>): PageSpec => ({ ...all, ...init });

const rollout = (rolloutId: string, init: { status?: RolloutStatus; endTime?: number; groupId?: string; latestAttempt?: Attempt } = {}) =>
  create(RolloutSchema, { rolloutId, startTime: 100, status: RolloutStatus.QUEUING, ...init });
const attempt = (rolloutId: string, attemptId: string, sequenceId: number, init: object = {}) =>
  create(AttemptSchema, {
    rolloutId,
    attemptId,
    sequenceId,
    startTime: 100 + sequenceId,
    status: AttemptStatus.PREPARING,
    ...init,
  });
/** Takes a database of this version back to version 4: no call keys, and the index of LLM spans as it was. */
function undoVersion5(db: Database.Database): void {
  db.exec("DROP INDEX spans_llm; ALTER TABLE spans DROP COLUMN llm_call_key");
  db.exec("CREATE INDEX spans_llm ON spans (rollout_id, llm_prompt_tokens, llm_response_tokens) WHERE llm_response_tokens IS NOT NULL");
}

const span = (rolloutId: string, attemptId: string, spanId: string, sequenceId: number, init: object = {}) =>
  create(SpanSchema, {
    rolloutId,
    attemptId,
    spanId,
    sequenceId,
    traceId: "t".repeat(32),
    name: `span-${spanId}`,
    ...init,
  });
const resources = (resourcesId: string, version = 1) =>
  create(ResourcesUpdateSchema, { resourcesId, createTime: 10, updateTime: 10 + version, version });
const worker = (workerId: string, status: WorkerStatus, init: object = {}) => create(WorkerSchema, { workerId, status, ...init });

const ids = <T extends { rolloutId: string }>(items: T[]) => items.map((item) => item.rolloutId);

describe.each(backends)("$name backend", ({ make }) => {
  let backend: StorageBackend;
  /**
   * Behaviour the memory backend does not share yet (reported to the lead): descending default order, the latest
   * attempt by sequence id when attempts were inserted out of order, and `close()` waiting for / refusing transactions.
   */
  const tx = <T>(fn: (tx: StorageTx) => Promise<T>) => backend.transaction(fn);

  beforeEach(() => {
    backend = make();
  });
  afterEach(async () => {
    await backend.close();
  });

  describe("rollouts", () => {
    it("stores, replaces in place and strips latestAttempt", async () => {
      await tx(async (t) => {
        await t.insertRollouts([rollout("ro-a"), rollout("ro-b"), rollout("ro-c")]);
        const b = rollout("ro-b", { status: RolloutStatus.RUNNING, latestAttempt: attempt("ro-b", "at-1", 1) });
        await t.putRollout(b);
      });
      const result = await tx(async (t) => ({
        b: await t.getRollout("ro-b"),
        missing: await t.getRollout("ro-zzz"),
        page: await t.queryRollouts({ any: false }, all),
        active: await t.activeRollouts(),
      }));
      expect(result.b?.status).toBe(RolloutStatus.RUNNING);
      expect(result.b?.latestAttempt).toBeUndefined();
      expect(result.missing).toBeUndefined();
      // A replacement keeps the insertion position.
      expect(ids(result.page.items)).toEqual(["ro-a", "ro-b", "ro-c"]);
      expect(result.page.total).toBe(3);
      expect(ids(result.active)).toEqual(["ro-b"]);
    });

    it("returns copies: mutating a result changes nothing stored", async () => {
      await tx((t) => t.insertRollouts([rollout("ro-a")]));
      const first = await tx(async (t) => (await t.getRollout("ro-a"))!);
      first.status = RolloutStatus.FAILED;
      const again = await tx(async (t) => (await t.getRollout("ro-a"))!);
      expect(again.status).toBe(RolloutStatus.QUEUING);
    });

    describe("filters", () => {
      beforeEach(async () => {
        await tx((t) =>
          t.insertRollouts([
            rollout("ro-aaa1", { status: RolloutStatus.QUEUING, groupId: "g1" }),
            rollout("ro-bbb2", { status: RolloutStatus.RUNNING, groupId: "g1" }),
            rollout("ro-AAA3", { status: RolloutStatus.SUCCEEDED, groupId: "g2" }),
            rollout("ro-a%_4", { status: RolloutStatus.RUNNING }),
          ]),
        );
      });
      const query = (filter: Parameters<StorageTx["queryRollouts"]>[0]) => tx(async (t) => ids((await t.queryRollouts(filter, all)).items));

      it("matches everything without conditions, under AND and OR alike", async () => {
        expect(await query({ any: false })).toHaveLength(4);
        expect(await query({ any: true })).toHaveLength(4);
        expect(await query({ any: true, statusIn: [], rolloutIdIn: [] })).toHaveLength(4);
      });

      it("combines conditions with AND or OR", async () => {
        const filter = { statusIn: [RolloutStatus.RUNNING], groupId: "g1" };
        expect(await query({ ...filter, any: false })).toEqual(["ro-bbb2"]);
        expect(await query({ ...filter, any: true })).toEqual(["ro-aaa1", "ro-bbb2", "ro-a%_4"]);
        expect(await query({ rolloutIdIn: ["ro-AAA3", "ro-nope", "ro-aaa1"], any: false })).toEqual(["ro-aaa1", "ro-AAA3"]);
        expect(await query({ statusIn: [RolloutStatus.QUEUING, RolloutStatus.SUCCEEDED], groupId: "g2", any: false })).toEqual(["ro-AAA3"]);
      });

      it("contains is a case-sensitive substring with no wildcards", async () => {
        expect(await query({ rolloutIdContains: "aaa", any: false })).toEqual(["ro-aaa1"]);
        expect(await query({ rolloutIdContains: "AAA", any: false })).toEqual(["ro-AAA3"]);
        expect(await query({ rolloutIdContains: "%", any: false })).toEqual(["ro-a%_4"]);
        expect(await query({ rolloutIdContains: "_", any: false })).toEqual(["ro-a%_4"]);
        expect(await query({ rolloutIdContains: "a_", any: false })).toEqual([]);
      });
    });

    describe("sorting and pagination", () => {
      beforeEach(async () => {
        await tx((t) =>
          t.insertRollouts([
            rollout("ro-1", { status: RolloutStatus.RUNNING, endTime: 5 }),
            rollout("ro-2", { status: RolloutStatus.QUEUING }),
            rollout("ro-3", { status: RolloutStatus.RUNNING, endTime: 3 }),
            rollout("ro-4", { status: RolloutStatus.QUEUING }),
            rollout("ro-5", { status: RolloutStatus.RUNNING, endTime: 5 }),
          ]),
        );
      });
      const query = (spec: Partial<PageSpec>) => tx((t) => t.queryRollouts({ any: false }, page(spec)));

      it("keeps insertion order for ties in both directions", async () => {
        expect(ids((await query({ sortBy: "status" })).items)).toEqual(["ro-2", "ro-4", "ro-1", "ro-3", "ro-5"]);
        expect(ids((await query({ sortBy: "status", descending: true })).items)).toEqual(["ro-1", "ro-3", "ro-5", "ro-2", "ro-4"]);
      });

      it("sorts unset times as +infinity", async () => {
        expect(ids((await query({ sortBy: "end_time" })).items)).toEqual(["ro-3", "ro-1", "ro-5", "ro-2", "ro-4"]);
        expect(ids((await query({ sortBy: "end_time", descending: true })).items)).toEqual(["ro-2", "ro-4", "ro-1", "ro-5", "ro-3"]);
      });

      it("defaults to insertion order, reversed when descending", async () => {
        expect(ids((await query({})).items)).toEqual(["ro-1", "ro-2", "ro-3", "ro-4", "ro-5"]);
        expect(ids((await query({ descending: true })).items)).toEqual(["ro-5", "ro-4", "ro-3", "ro-2", "ro-1"]);
      });

      it("paginates with totals counted before pagination", async () => {
        const window = await query({ limit: 2, offset: 1 });
        expect(ids(window.items)).toEqual(["ro-2", "ro-3"]);
        expect(window.total).toBe(5);
        const tail = await query({ limit: 10, offset: 3 });
        expect(ids(tail.items)).toEqual(["ro-4", "ro-5"]);
        expect(tail.total).toBe(5);
        const none = await query({ limit: 0 });
        expect(none.items).toEqual([]);
        expect(none.total).toBe(5);
        const past = await query({ limit: 3, offset: 9 });
        expect(past).toEqual({ items: [], total: 5 });
        const pastAll = await query({ limit: -1, offset: 5 });
        expect(pastAll).toEqual({ items: [], total: 5 });
        const rest = await query({ limit: -1, offset: 3 });
        expect(ids(rest.items)).toEqual(["ro-4", "ro-5"]);
        expect(rest.total).toBe(5);
        const exact = await query({ limit: 5 });
        expect(exact.total).toBe(5);
        const filtered = await tx((t) => t.queryRollouts({ statusIn: [RolloutStatus.RUNNING], any: false }, page({ limit: 1, offset: 1 })));
        expect(ids(filtered.items)).toEqual(["ro-3"]);
        expect(filtered.total).toBe(3);
      });
    });
  });

  describe("attempts", () => {
    it("finds the latest attempt per rollout and sorts by sequence id by default", async () => {
      await tx(async (t) => {
        await t.insertRollouts([rollout("ro-a"), rollout("ro-b"), rollout("ro-c")]);
        await t.insertAttempt(attempt("ro-a", "at-2", 2));
        await t.insertAttempt(attempt("ro-a", "at-1", 1));
        await t.insertAttempt(attempt("ro-b", "at-3", 1));
        await t.putAttempt(attempt("ro-a", "at-2", 2, { status: AttemptStatus.RUNNING, lastHeartbeatTime: 7 }));
      });
      const result = await tx(async (t) => ({
        latest: await t.latestAttempts(["ro-a", "ro-b", "ro-c", "ro-a"]),
        one: await t.getAttempt("ro-a", "at-2"),
        wrongRollout: await t.getAttempt("ro-b", "at-2"),
        page: await t.queryAttempts("ro-a", all),
        desc: await t.queryAttempts("ro-a", page({ descending: true })),
        byHeartbeat: await t.queryAttempts("ro-a", page({ sortBy: "last_heartbeat_time" })),
        other: await t.queryAttempts("ro-zzz", all),
      }));
      expect([...result.latest.keys()].sort()).toEqual(["ro-a", "ro-b"]);
      expect(result.latest.get("ro-a")?.attemptId).toBe("at-2");
      expect(result.latest.get("ro-a")?.status).toBe(AttemptStatus.RUNNING);
      expect(result.one?.lastHeartbeatTime).toBe(7);
      expect(result.wrongRollout).toBeUndefined();
      expect(result.page.items.map((a) => a.attemptId)).toEqual(["at-1", "at-2"]);
      expect(result.page.total).toBe(2);
      expect(result.desc.items.map((a) => a.attemptId)).toEqual(["at-2", "at-1"]);
      expect(result.byHeartbeat.items.map((a) => a.attemptId)).toEqual(["at-2", "at-1"]);
      expect(result.other).toEqual({ items: [], total: 0 });
    });
  });

  describe("queue", () => {
    it("is FIFO without duplicates", async () => {
      await tx((t) => t.enqueue(["ro-1", "ro-2", "ro-1", "ro-3"]));
      await tx((t) => t.enqueue(["ro-2", "ro-4"]));
      expect((await tx((t) => t.counts())).queueLength).toBe(4);
      expect(await tx((t) => t.dequeue(2))).toEqual(["ro-1", "ro-2"]);
      // Dequeued ids may be queued again; they go to the back.
      await tx((t) => t.enqueue(["ro-1"]));
      expect(await tx((t) => t.dequeue(0))).toEqual([]);
      expect(await tx((t) => t.dequeue(10))).toEqual(["ro-3", "ro-4", "ro-1"]);
      expect(await tx((t) => t.dequeue(10))).toEqual([]);
      await tx((t) => t.enqueue(["ro-9"]));
      expect(await tx((t) => t.dequeue(1))).toEqual(["ro-9"]);
    });
  });

  describe("spans", () => {
    it("is idempotent by key, also within one batch", async () => {
      const first = await tx((t) =>
        t.insertSpans([span("ro-a", "at-1", "s1", 1), span("ro-a", "at-1", "s2", 2), span("ro-a", "at-2", "s1", 3)]),
      );
      expect(first).toEqual([
        { sequenceId: 1, duplicate: false },
        { sequenceId: 2, duplicate: false },
        { sequenceId: 3, duplicate: false },
      ]);
      const second = await tx((t) =>
        t.insertSpans([
          span("ro-a", "at-1", "s2", 10, { name: "changed" }),
          span("ro-a", "at-1", "s3", 11),
          span("ro-a", "at-1", "s3", 12, { name: "changed" }),
          span("ro-b", "at-1", "s1", 1),
        ]),
      );
      expect(second).toEqual([
        { sequenceId: 2, duplicate: true },
        { sequenceId: 11, duplicate: false },
        { sequenceId: 11, duplicate: true },
        { sequenceId: 1, duplicate: false },
      ]);
      const stored = await tx((t) => t.querySpans({ rolloutId: "ro-a", any: false }, all));
      expect(stored.items.map((s) => [s.attemptId, s.spanId, s.sequenceId, s.name])).toEqual([
        ["at-1", "s1", 1, "span-s1"],
        ["at-1", "s2", 2, "span-s2"],
        ["at-2", "s1", 3, "span-s1"],
        ["at-1", "s3", 11, "span-s3"],
      ]);
      const existing = await tx((t) =>
        t.existingSpans([
          ["ro-a", "at-1", "s3"],
          ["ro-a", "at-9", "s3"],
          ["ro-b", "at-1", "s1"],
        ]),
      );
      expect(existing).toEqual(
        new Map([
          ["ro-a\0at-1\0s3", 11],
          ["ro-b\0at-1\0s1", 1],
        ]),
      );
      expect((await tx((t) => t.counts())).spans).toBe(5);
    });

    describe("queries", () => {
      beforeEach(async () => {
        await tx((t) =>
          t.insertSpans([
            span("ro-a", "at-1", "root", 1, { name: "Agent", startTime: 5 }),
            span("ro-a", "at-1", "llm", 2, { name: "llm.call", parentId: "root", startTime: 3 }),
            span("ro-a", "at-2", "root", 3, { name: "agent", traceId: "f".repeat(32) }),
            span("ro-a", "at-2", "tool", 4, { name: "tool%", parentId: "root", startTime: 3 }),
            span("ro-b", "at-1", "root", 1, { name: "Agent" }),
          ]),
        );
      });
      const query = (filter: Omit<Parameters<StorageTx["querySpans"]>[0], "rolloutId">, spec: Partial<PageSpec> = {}) =>
        tx(async (t) => {
          const result = await t.querySpans({ rolloutId: "ro-a", ...filter }, page(spec));
          return result.items.map((s) => `${s.attemptId}/${s.spanId}`);
        });

      it("always applies rollout, attempt and after-sequence restrictions", async () => {
        expect(await query({ any: true })).toEqual(["at-1/root", "at-1/llm", "at-2/root", "at-2/tool"]);
        expect(await query({ any: true, attemptId: "at-2" })).toEqual(["at-2/root", "at-2/tool"]);
        expect(await query({ any: false, afterSequenceId: 2 })).toEqual(["at-2/root", "at-2/tool"]);
        // OR among the conditions, AND with the restrictions.
        const either = { name: { exact: "Agent" }, spanId: { exact: "llm" } };
        expect(await query({ any: true, attemptId: "at-1", afterSequenceId: 1, ...either })).toEqual(["at-1/llm"]);
        expect(await query({ any: true, attemptId: "at-1", ...either })).toEqual(["at-1/root", "at-1/llm"]);
        expect(await query({ any: true, attemptId: "at-9" })).toEqual([]);
      });

      it("matches strings exactly or by case-sensitive substring", async () => {
        expect(await query({ any: false, name: { contains: "gent" } })).toEqual(["at-1/root", "at-2/root"]);
        expect(await query({ any: false, name: { contains: "Agent" } })).toEqual(["at-1/root"]);
        expect(await query({ any: false, name: { contains: "%" } })).toEqual(["at-2/tool"]);
        expect(await query({ any: false, parentId: { exact: "" } })).toEqual(["at-1/root", "at-2/root"]);
        expect(await query({ any: false, parentId: { exact: "root" }, spanId: { contains: "oo" } })).toEqual(["at-2/tool"]);
        expect(await query({ any: true, parentId: { exact: "root" }, traceId: { contains: "ff" } })).toEqual([
          "at-1/llm",
          "at-2/root",
          "at-2/tool",
        ]);
      });

      it("sorts by a field with ties in insertion order and unset times last", async () => {
        expect(await query({ any: false }, { sortBy: "start_time" })).toEqual(["at-1/llm", "at-2/tool", "at-1/root", "at-2/root"]);
        expect(await query({ any: false }, { sortBy: "start_time", descending: true })).toEqual([
          "at-2/root",
          "at-1/root",
          "at-1/llm",
          "at-2/tool",
        ]);
        expect(await query({ any: false }, { sortBy: "name" })).toEqual(["at-1/root", "at-2/root", "at-1/llm", "at-2/tool"]);
        expect(await query({ any: false }, { descending: true, limit: 2 })).toEqual(["at-2/tool", "at-2/root"]);
      });

      it("counts the total before pagination", async () => {
        const result = await tx((t) => t.querySpans({ rolloutId: "ro-a", any: false, afterSequenceId: 1 }, page({ limit: 1, offset: 1 })));
        expect(result.items.map((s) => s.spanId)).toEqual(["root"]);
        expect(result.total).toBe(3);
      });
    });

    it("issues and raises per-rollout sequence counters", async () => {
      const issued = await tx(async (t) => {
        const a1 = await t.nextSequenceId("ro-a", 1);
        const a4 = await t.nextSequenceId("ro-a", 3);
        const b2 = await t.nextSequenceId("ro-b", 2);
        await t.raiseSequenceId("ro-a", 10);
        await t.raiseSequenceId("ro-a", 7);
        const a11 = await t.nextSequenceId("ro-a", 1);
        await t.raiseSequenceId("ro-c", 5);
        const c5 = await t.nextSequenceId("ro-c", 0);
        return [a1, a4, b2, a11, c5];
      });
      expect(issued).toEqual([1, 4, 2, 11, 5]);
    });
  });

  describe("resources", () => {
    it("tracks the snapshot written last, by insert or put", async () => {
      expect(await tx((t) => t.latestResources())).toBeUndefined();
      await tx(async (t) => {
        await t.insertResources(resources("rs-1"));
        await t.insertResources(resources("rs-2"));
      });
      expect((await tx((t) => t.latestResources()))?.resourcesId).toBe("rs-2");
      await tx((t) => t.putResources(resources("rs-1", 2)));
      const latest = await tx((t) => t.latestResources());
      expect(latest?.resourcesId).toBe("rs-1");
      expect(latest?.version).toBe(2);
      const result = await tx(async (t) => ({
        all: await t.queryResources({}, all),
        byVersion: await t.queryResources({}, page({ sortBy: "version", descending: true })),
        exact: await t.queryResources({ resourcesId: "rs-2" }, all),
        contains: await t.queryResources({ resourcesIdContains: "rs-" }, page({ limit: 1 })),
        both: await t.queryResources({ resourcesId: "rs-2", resourcesIdContains: "1" }, all),
        got: await t.getResources("rs-1"),
        missing: await t.getResources("rs-9"),
      }));
      expect(result.all.items.map((r) => r.resourcesId)).toEqual(["rs-1", "rs-2"]);
      expect(result.byVersion.items.map((r) => r.resourcesId)).toEqual(["rs-1", "rs-2"]);
      expect(result.exact.items.map((r) => r.resourcesId)).toEqual(["rs-2"]);
      expect(result.contains).toMatchObject({ total: 2 });
      expect(result.contains.items).toHaveLength(1);
      expect(result.both.total).toBe(0);
      expect(result.got?.version).toBe(2);
      expect(result.missing).toBeUndefined();
    });
  });

  describe("workers", () => {
    it("upserts in place and filters", async () => {
      await tx(async (t) => {
        await t.putWorker(worker("w-1", WorkerStatus.IDLE, { lastIdleTime: 3 }));
        await t.putWorker(worker("w-2", WorkerStatus.BUSY));
        await t.putWorker(worker("W-3", WorkerStatus.UNKNOWN, { lastIdleTime: 1 }));
        await t.putWorker(worker("w-1", WorkerStatus.BUSY, { lastIdleTime: 3 }));
      });
      const result = await tx(async (t) => {
        const names = async (filter: Parameters<StorageTx["queryWorkers"]>[0], spec: Partial<PageSpec> = {}) =>
          (await t.queryWorkers(filter, page(spec))).items.map((w) => w.workerId);
        return {
          all: await names({ any: false }),
          busy: await names({ statusIn: [WorkerStatus.BUSY], any: false }),
          and: await names({ statusIn: [WorkerStatus.BUSY], workerIdContains: "w-", any: false }),
          or: await names({ statusIn: [WorkerStatus.UNKNOWN], workerIdContains: "w-2", any: true }),
          upper: await names({ workerIdContains: "W", any: false }),
          idleAsc: await names({ any: false }, { sortBy: "last_idle_time" }),
          idleDesc: await names({ any: false }, { sortBy: "last_idle_time", descending: true }),
          got: await t.getWorker("w-1"),
        };
      });
      expect(result.all).toEqual(["w-1", "w-2", "W-3"]);
      expect(result.busy).toEqual(["w-1", "w-2"]);
      expect(result.and).toEqual(["w-1", "w-2"]);
      expect(result.or).toEqual(["w-2", "W-3"]);
      expect(result.upper).toEqual(["W-3"]);
      expect(result.idleAsc).toEqual(["W-3", "w-1", "w-2"]);
      expect(result.idleDesc).toEqual(["w-2", "w-1", "W-3"]);
      expect(result.got?.status).toBe(WorkerStatus.BUSY);
    });

    it("keeps a worker's heartbeat stats through rewrites, whatever callers do with their objects later", async () => {
      const stats = { cpu: 0.5, tags: ["a"], nested: { n: 1 } };
      await tx((t) => t.putWorker(worker("w-1", WorkerStatus.IDLE, { heartbeatStats: stats })));
      stats.cpu = 9;
      stats.nested.n = 9;
      for (let i = 1; i <= 3; i++) {
        await tx(async (t) => {
          const read = (await t.getWorker("w-1")) as Worker;
          read.status = WorkerStatus.BUSY;
          read.lastBusyTime = i;
          await t.putWorker(read);
          read.status = WorkerStatus.UNKNOWN; // after the write: the caller's object, not the stored row
        });
      }
      const got = (await tx((t) => t.getWorker("w-1"))) as Worker;
      expect(got).toMatchObject({
        status: WorkerStatus.BUSY,
        lastBusyTime: 3,
        heartbeatStats: { cpu: 0.5, tags: ["a"], nested: { n: 1 } },
      });
      got.status = WorkerStatus.IDLE;
      got.heartbeatStats = { cpu: 1 };
      const again = await tx(async (t) => ({
        got: await t.getWorker("w-1"),
        listed: (await t.queryWorkers({ any: false }, page({}))).items,
      }));
      expect(again.got).toMatchObject({ status: WorkerStatus.BUSY, heartbeatStats: { cpu: 0.5, tags: ["a"], nested: { n: 1 } } });
      expect(again.listed).toEqual([again.got]);
    });
  });

  describe("transactions", () => {
    it("counts everything", async () => {
      await tx(async (t) => {
        await t.insertRollouts([
          rollout("ro-1"),
          rollout("ro-2", { status: RolloutStatus.RUNNING }),
          rollout("ro-3", { status: RolloutStatus.RUNNING }),
        ]);
        await t.insertAttempt(attempt("ro-2", "at-1", 1));
        await t.enqueue(["ro-1"]);
        await t.insertSpans([span("ro-2", "at-1", "s", 1)]);
        await t.insertResources(resources("rs-1"));
        await t.putWorker(worker("w", WorkerStatus.IDLE));
      });
      const counts = await tx((t) => t.counts());
      expect(counts).toEqual({
        rollouts: 3,
        attempts: 1,
        spans: 1,
        resources: 1,
        workers: 1,
        queueLength: 1,
        rolloutsByStatus: new Map([
          [RolloutStatus.QUEUING, 1],
          [RolloutStatus.RUNNING, 2],
        ]),
      });
    });

    it("delivers events after commit and drops writes and events on throw", async () => {
      const events: StoreEvent[] = [];
      const unsubscribe = backend.subscribe((event) => events.push(event));
      const seenDuring: number[] = [];
      await tx(async (t) => {
        await t.insertRollouts([rollout("ro-1")]);
        t.notify({ kind: "queued" });
        seenDuring.push(events.length);
      });
      expect(seenDuring).toEqual([0]);
      expect(events).toEqual([{ kind: "queued" }]);

      const failure = new Error("boom");
      await expect(
        tx(async (t) => {
          await t.insertRollouts([rollout("ro-2")]);
          await t.enqueue(["ro-2"]);
          await t.insertSpans([span("ro-2", "at-1", "s", 1)]);
          await t.nextSequenceId("ro-2", 5);
          await t.insertResources(resources("rs-1"));
          t.notify({ kind: "finished", rolloutIds: ["ro-1"] });
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(events).toHaveLength(1);
      const after = await tx(async (t) => ({
        counts: await t.counts(),
        rollout: await t.getRollout("ro-2"),
        latest: await t.latestResources(),
        next: await t.nextSequenceId("ro-2", 1),
      }));
      expect(after.rollout).toBeUndefined();
      expect(after.latest).toBeUndefined();
      expect(after.next).toBe(1);
      expect(after.counts).toMatchObject({ rollouts: 1, spans: 0, resources: 0, queueLength: 0 });

      unsubscribe();
      await tx(async (t) => t.notify({ kind: "resources", update: resources("rs-1") }));
      expect(events).toHaveLength(1);
    });

    it("keeps working after a failed statement", async () => {
      await tx((t) => t.insertRollouts([rollout("ro-1")]));
      // Inserting an existing rollout is a constraint error: the transaction rolls back.
      await expect(tx((t) => t.insertRollouts([rollout("ro-2"), rollout("ro-1")]))).rejects.toThrow();
      expect(await tx((t) => t.getRollout("ro-2"))).toBeUndefined();
      expect((await tx((t) => t.counts())).rollouts).toBe(1);
    });

    it("isolates concurrent transactions", async () => {
      await tx((t) => t.insertRollouts([rollout("ro-1")]));
      const order: string[] = [];
      const slow = tx(async (t) => {
        order.push("slow:start");
        await new Promise((resolve) => setTimeout(resolve, 20));
        await t.insertRollouts([rollout("ro-slow")]);
        order.push("slow:end");
      });
      const fast = tx(async (t) => {
        order.push("fast:start");
        return (await t.queryRollouts({ any: false }, all)).total;
      });
      await Promise.all([slow, fast]);
      expect(order).toEqual(["slow:start", "slow:end", "fast:start"]);
      expect(await fast).toBe(2);
    });

    it("closes after pending transactions and refuses new ones", async () => {
      const pending = tx(async (t) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        await t.insertRollouts([rollout("ro-1")]);
        return "done";
      });
      const closed = backend.close();
      await expect(pending).resolves.toBe("done");
      await closed;
      await expect(tx(async () => 1)).rejects.toThrow();
      backend = make(); // for afterEach
    });
  });
});

const modulePath = (relative: string) => JSON.stringify(fileURLToPath(new URL(relative, import.meta.url)));

/** A child process running `script` as an ES module, with `createSqliteBackend` imported; stdout and stderr piped. */
const scriptWithBackend = (script: string) =>
  spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "--input-type=module",
      "-e",
      `const { createSqliteBackend } = await import(${modulePath("../../src/store/backends/sqlite/sqlite-backend.ts")});\n${script}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );

describe("sqlite backend on a file", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "agl-sqlite-"));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("makes new databases with pages of 8 KiB and keeps the page size of one written before", async () => {
    const pageSize = (path: string) => {
      const file = new Database(path, { readonly: true });
      try {
        return file.pragma("page_size", { simple: true });
      } finally {
        file.close();
      }
    };
    const fresh = join(dir, "fresh.db");
    await createSqliteBackend({ path: fresh }).close();
    expect(pageSize(fresh)).toBe(8192);
    // A database of 4 KiB pages, as SQLite makes by default (and agl did until December 2026).
    const older = join(dir, "older.db");
    const db = new Database(older);
    db.pragma("page_size = 4096");
    db.exec("CREATE TABLE older_table (x)");
    db.close();
    const backend = createSqliteBackend({ path: older });
    await backend.transaction((t) => t.insertRollouts([rollout("ro-1")]));
    await backend.close();
    expect(pageSize(older)).toBe(4096);
  });

  it("finds everything after reopening, latest resources included", async () => {
    const path = join(dir, "store.db");
    const first = createSqliteBackend({ path });
    await first.transaction(async (t) => {
      await t.insertRollouts([rollout("ro-1", { groupId: "g" }), rollout("ro-2")]);
      await t.insertAttempt(attempt("ro-1", "at-1", 1));
      await t.enqueue(["ro-2", "ro-1"]);
      await t.insertSpans([span("ro-1", "at-1", "s1", 1), span("ro-1", "at-1", "s2", 2)]);
      await t.nextSequenceId("ro-1", 2);
      await t.insertResources(resources("rs-1"));
      await t.insertResources(resources("rs-2"));
      await t.putResources(resources("rs-1", 2));
      await t.putWorker(worker("w-1", WorkerStatus.BUSY));
    });
    await first.close();

    const second = createSqliteBackend({ path });
    const found = await second.transaction(async (t) => ({
      rollouts: ids((await t.queryRollouts({ any: false }, all)).items),
      attempt: await t.getAttempt("ro-1", "at-1"),
      spans: (await t.querySpans({ rolloutId: "ro-1", any: false }, all)).items.map((s) => s.spanId),
      duplicate: await t.insertSpans([span("ro-1", "at-1", "s2", 9)]),
      next: await t.nextSequenceId("ro-1", 1),
      latest: await t.latestResources(),
      worker: await t.getWorker("w-1"),
      queue: await t.dequeue(10),
    }));
    await second.close();
    expect(found.rollouts).toEqual(["ro-1", "ro-2"]);
    expect(found.attempt?.sequenceId).toBe(1);
    expect(found.spans).toEqual(["s1", "s2"]);
    expect(found.duplicate).toEqual([{ sequenceId: 2, duplicate: true }]);
    expect(found.next).toBe(3);
    expect(found.latest?.resourcesId).toBe("rs-1");
    expect(found.latest?.version).toBe(2);
    expect(found.worker?.status).toBe(WorkerStatus.BUSY);
    expect(found.queue).toEqual(["ro-2", "ro-1"]);

    const db = new Database(path, { readonly: true });
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
  });

  it("keeps every acknowledged write when the process is killed with SIGKILL", async () => {
    const path = join(dir, "crash.db");
    // A child commits rollouts and acknowledges each on stdout when its call returns.
    const child = scriptWithBackend(
      `const { create } = await import("@bufbuild/protobuf");
       const { RolloutSchema } = await import(${modulePath("../../src/gen/agl/v1/types_pb.ts")});
       const backend = createSqliteBackend({ path: ${JSON.stringify(path)} });
       for (let i = 0; ; i += 8) {
         // Eight calls at a time, so that they share COMMITs.
         await Promise.all(Array.from({ length: 8 }, async (_, k) => {
           const rolloutId = "ro-" + (i + k);
           await backend.transaction((tx) => tx.insertRollouts([create(RolloutSchema, { rolloutId, startTime: i + k })]));
           process.stdout.write(rolloutId + "\\n");
         }));
       }`,
    );
    const acked: string[] = [];
    const exited = new Promise((resolve) => child.on("exit", resolve));
    for await (const line of createInterface({ input: child.stdout! })) {
      acked.push(line);
      if (acked.length === 200) child.kill("SIGKILL");
    }
    await exited;
    expect(acked.length).toBeGreaterThanOrEqual(200);

    const reopened = createSqliteBackend({ path });
    const stored = await reopened.transaction(async (t) => ids((await t.queryRollouts({ any: false }, all)).items));
    await reopened.close();
    expect(stored.slice(0, acked.length)).toEqual(acked);
  });

  describe("group commit", () => {
    /** Rollout ids another connection sees committed. */
    const committed = (path: string) => {
      const db = new Database(path, { readonly: true });
      try {
        return (db.prepare("SELECT rollout_id FROM rollouts ORDER BY rollout_id").pluck().all() as string[]).sort();
      } finally {
        db.close();
      }
    };
    const insert = (backend: StorageBackend, rolloutId: string) =>
      backend.transaction(async (t) => {
        await t.insertRollouts([rollout(rolloutId)]);
        t.notify({ kind: "finished", rolloutIds: [rolloutId] });
        return rolloutId;
      });

    it("answers calls that queued together after one COMMIT covering all of them", async () => {
      const path = join(dir, "group.db");
      const backend = createSqliteBackend({ path });
      const names = Array.from({ length: 20 }, (_, i) => `ro-${String(i).padStart(2, "0")}`);
      const seenAtAnswer: string[][] = [];
      await Promise.all(names.map((name) => insert(backend, name).then(() => seenAtAnswer.push(committed(path)))));
      await backend.close();
      // Every answer came after its write was durable, and the first answer already found all twenty committed.
      expect(seenAtAnswer).toHaveLength(20);
      for (const seen of seenAtAnswer) expect(seen).toEqual(names);
    });

    it("write a worker's row once a group however often its calls rewrite it, before a query that reads it, and undo it with its call", async () => {
      const path = join(dir, "group-workers.db");
      const backend = createSqliteBackend({ path });
      await backend.transaction((t) => t.counts());
      // Another connection counts the statements that write a worker's row.
      const file = new Database(path);
      file.exec(`
        CREATE TABLE worker_writes (worker_id TEXT NOT NULL);
        CREATE TRIGGER worker_inserted AFTER INSERT ON workers BEGIN INSERT INTO worker_writes VALUES (new.worker_id); END;
        CREATE TRIGGER worker_updated AFTER UPDATE ON workers BEGIN INSERT INTO worker_writes VALUES (new.worker_id); END;
      `);
      const writes = () => {
        const counted = file.prepare("SELECT worker_id, count(*) FROM worker_writes GROUP BY worker_id ORDER BY worker_id").raw().all();
        file.exec("DELETE FROM worker_writes");
        return Object.fromEntries(counted as Array<[string, number]>);
      };
      const stored = () => {
        const rows = file.prepare("SELECT worker_id, status, last_busy_time FROM workers ORDER BY seq").raw().all();
        return Object.fromEntries((rows as Array<[string, number, number]>).map(([id, status, busy]) => [id, [status, busy]]));
      };
      // Each call rewrites a worker, and answers with what it reads back.
      const put = (workerId: string, status: WorkerStatus, lastBusyTime: number) =>
        backend.transaction(async (t) => {
          const worker = (await t.getWorker(workerId)) ?? create(WorkerSchema, { workerId });
          await t.putWorker({ ...worker, status, lastBusyTime });
          const read = await t.getWorker(workerId);
          return [read?.status, read?.lastBusyTime];
        });
      const { BUSY, IDLE } = WorkerStatus;
      expect(
        await Promise.all([put("w-1", BUSY, 1), put("w-1", IDLE, 2), put("w-2", BUSY, 3), put("w-1", BUSY, 4), put("w-2", IDLE, 5)]),
      ).toEqual([
        [BUSY, 1],
        [IDLE, 2],
        [BUSY, 3],
        [BUSY, 4],
        [IDLE, 5],
      ]);
      expect(writes()).toEqual({ "w-1": 1, "w-2": 1 });
      expect(stored()).toEqual({ "w-1": [BUSY, 4], "w-2": [IDLE, 5] });
      // A query inside the group sees the rows written before it (they are written first), and counts too.
      const listed = () =>
        backend.transaction(async (t) => [
          (await t.queryWorkers({ any: false }, page({}))).items.map((w) => [w.workerId, w.status]),
          (await t.counts()).workers,
        ]);
      const [, [rows, workerCount]] = await Promise.all([put("w-3", BUSY, 6), listed(), put("w-3", IDLE, 7)]);
      expect([rows, workerCount]).toEqual([
        [
          ["w-1", BUSY],
          ["w-2", IDLE],
          ["w-3", BUSY],
        ],
        3,
      ]);
      expect(writes()).toEqual({ "w-3": 2 });
      // A call that fails after rewriting a worker: its write is undone, the other calls' writes are kept.
      const failing = () =>
        backend.transaction(async (t) => {
          await t.putWorker(create(WorkerSchema, { workerId: "w-4", status: IDLE, lastBusyTime: 9 }));
          await t.putWorker(create(WorkerSchema, { workerId: "w-6", status: IDLE, lastBusyTime: 9 }));
          throw new Error("boom");
        });
      const settled = await Promise.allSettled([put("w-4", BUSY, 8), failing(), put("w-5", BUSY, 10)]);
      expect(settled.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect(stored()).toEqual({ "w-1": [BUSY, 4], "w-2": [IDLE, 5], "w-3": [IDLE, 7], "w-4": [BUSY, 8], "w-5": [BUSY, 10] });
      expect(await backend.transaction(async (t) => [(await t.getWorker("w-4"))?.status, await t.getWorker("w-6")])).toEqual([
        BUSY,
        undefined,
      ]);
      file.close();
      await backend.close();
    });

    it("a call failing inside a group undoes only its own writes and events", async () => {
      const path = join(dir, "group-fail.db");
      const backend = createSqliteBackend({ path });
      const events: StoreEvent[] = [];
      backend.subscribe((e) => events.push(e));
      const failing = backend.transaction(async (t) => {
        await t.insertRollouts([rollout("ro-b")]);
        t.notify({ kind: "finished", rolloutIds: ["ro-b"] });
        throw new Error("boom");
      });
      const outcomes = await Promise.allSettled([insert(backend, "ro-a"), failing, insert(backend, "ro-c")]);
      expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect(committed(path)).toEqual(["ro-a", "ro-c"]);
      expect(events).toEqual([
        { kind: "finished", rolloutIds: ["ro-a"] },
        { kind: "finished", rolloutIds: ["ro-c"] },
      ]);
      // A failed statement (not just a thrown error) inside a group is undone the same way.
      const duplicate = backend.transaction((t) => t.insertRollouts([rollout("ro-a")]));
      const after = await Promise.allSettled([duplicate, insert(backend, "ro-d")]);
      expect(after.map((o) => o.status)).toEqual(["rejected", "fulfilled"]);
      await backend.close();
      expect(committed(path)).toEqual(["ro-a", "ro-c", "ro-d"]);
    });

    it("runs the calls before a failed call that wrote again, and leaves them be when it wrote nothing", async () => {
      const path = join(dir, "group-rerun.db");
      const backend = createSqliteBackend({ path });
      const events: StoreEvent[] = [];
      backend.subscribe((e) => events.push(e));
      let runs = 0;
      const counted = (rolloutId: string) =>
        backend.transaction(async (t) => {
          runs++;
          await t.insertRollouts([rollout(rolloutId)]);
          t.notify({ kind: "finished", rolloutIds: [rolloutId] });
          return rolloutId;
        });
      const notFound = () =>
        backend.transaction(async (t) => {
          if (!(await t.getRollout("ro-missing"))) throw new Error("not found");
        });
      const refusedAfterWriting = () =>
        backend.transaction(async (t) => {
          await t.insertRollouts([rollout("ro-undone")]);
          t.notify({ kind: "finished", rolloutIds: ["ro-undone"] });
          throw new Error("refused");
        });
      const outcomes = await Promise.allSettled([counted("ro-1"), notFound(), counted("ro-2"), refusedAfterWriting(), counted("ro-3")]);
      expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as Error).message))).toEqual([
        "ro-1",
        "not found",
        "ro-2",
        "refused",
        "ro-3",
      ]);
      // The failed read undid nothing; the failed write rolled back ro-1 and ro-2, which ran again: five runs, not three.
      expect(runs).toBe(5);
      expect(committed(path)).toEqual(["ro-1", "ro-2", "ro-3"]);
      expect(events).toEqual(["ro-1", "ro-2", "ro-3"].map((id) => ({ kind: "finished", rolloutIds: [id] })));
      // The rows the rerun calls wrote are read back as they are now.
      expect(await backend.transaction(async (t) => (await t.getRollout("ro-2"))?.rolloutId)).toBe("ro-2");
      expect(await backend.transaction((t) => t.getRollout("ro-undone"))).toBeUndefined();
      await backend.close();
    });

    it("under a long queue, answers do not wait for the whole queue to commit", async () => {
      const path = join(dir, "group-cap.db");
      const backend = createSqliteBackend({ path });
      let firstSeen: string[] | undefined;
      const names = Array.from({ length: 300 }, (_, i) => `ro-${i}`);
      await Promise.all(names.map((name) => insert(backend, name).then(() => (firstSeen ??= committed(path)))));
      await backend.close();
      expect(firstSeen!.length).toBeGreaterThan(1);
      expect(firstSeen!.length).toBeLessThan(names.length);
      expect(committed(path)).toHaveLength(names.length);
    });
  });

  it("stores a worker as bytes any protobuf decoder reads as the worker written, stats and all", async () => {
    const path = join(dir, "workers.db");
    const backend = createSqliteBackend({ path });
    const stats = { done: 3, host: "h", load: [0.5, 1] };
    await backend.transaction((t) =>
      t.putWorker(create(WorkerSchema, { workerId: "w-1", status: WorkerStatus.IDLE, heartbeatStats: stats })),
    );
    // Read back and rewritten, as claims and attempts' ends do: the stats' field is written from what was stored.
    await backend.transaction(async (t) => {
      const read = (await t.getWorker("w-1")) as Worker;
      await t.putWorker({ ...read, status: WorkerStatus.BUSY, currentRolloutId: "ro-1", lastBusyTime: 5 });
    });
    await backend.close();
    const db = new Database(path, { readonly: true });
    const { data } = db.prepare("SELECT data FROM workers WHERE worker_id = 'w-1'").get() as { data: Uint8Array };
    db.close();
    expect(fromBinary(WorkerSchema, data)).toEqual(
      create(WorkerSchema, {
        workerId: "w-1",
        status: WorkerStatus.BUSY,
        currentRolloutId: "ro-1",
        lastBusyTime: 5,
        heartbeatStats: stats,
      }),
    );
    const reopened = createSqliteBackend({ path });
    expect((await reopened.transaction((t) => t.getWorker("w-1")))?.heartbeatStats).toEqual(stats);
    await reopened.close();
  });

  describe("row cache", () => {
    /** The rows a rollout's calls read again and again, as `backend` answers them now. */
    const rowsOf = (backend: StorageBackend) =>
      backend.transaction(async (t) => ({
        rollout: (await t.getRollout("ro-1"))?.status,
        attempt: (await t.getAttempt("ro-1", "at-1"))?.status,
        latest: (await t.latestAttempts(["ro-1"])).get("ro-1")?.attemptId,
        worker: (await t.getWorker("w-1"))?.status,
      }));
    const seed = (backend: StorageBackend) =>
      backend.transaction(async (t) => {
        await t.insertRollouts([rollout("ro-1")]);
        await t.insertAttempt(attempt("ro-1", "at-1", 1));
        await t.putWorker(create(WorkerSchema, { workerId: "w-1", status: WorkerStatus.IDLE }));
      });
    const change = async (t: StorageTx) => {
      await t.putRollout(rollout("ro-1", { status: RolloutStatus.RUNNING }));
      await t.putAttempt(attempt("ro-1", "at-1", 1, { status: AttemptStatus.RUNNING }));
      await t.insertAttempt(attempt("ro-1", "at-2", 2));
      await t.putWorker(create(WorkerSchema, { workerId: "w-1", status: WorkerStatus.BUSY }));
    };
    const seeded = { rollout: RolloutStatus.QUEUING, attempt: AttemptStatus.PREPARING, latest: "at-1", worker: WorkerStatus.IDLE };
    const changed = { rollout: RolloutStatus.RUNNING, attempt: AttemptStatus.RUNNING, latest: "at-2", worker: WorkerStatus.BUSY };

    it("sees what another connection committed after it cached the rows", async () => {
      const path = join(dir, "shared.db");
      const mine = createSqliteBackend({ path });
      const other = createSqliteBackend({ path });
      await seed(mine);
      expect(await rowsOf(mine)).toEqual(seeded);
      await other.transaction(change);
      expect(await rowsOf(mine)).toEqual(changed);
      await Promise.all([mine.close(), other.close()]);
    });

    it("forgets what an undone call wrote, alone and inside a group", async () => {
      const backend = createSqliteBackend({ path: join(dir, "undo.db") });
      await seed(backend);
      expect(await rowsOf(backend)).toEqual(seeded);
      const failure = new Error("boom");
      const undone = () =>
        backend.transaction(async (t) => {
          await change(t);
          throw failure;
        });
      await expect(undone()).rejects.toBe(failure);
      expect(await rowsOf(backend)).toEqual(seeded);
      // Queued together, the reading call runs in the same group, right after the undone one.
      const outcomes = await Promise.allSettled([undone(), rowsOf(backend)]);
      expect(outcomes).toEqual([
        { status: "rejected", reason: failure },
        { status: "fulfilled", value: seeded },
      ]);
      expect(await rowsOf(backend)).toEqual(seeded);
      await backend.transaction(change);
      expect(await rowsOf(backend)).toEqual(changed);
      await backend.close();
    });
  });

  describe("the spans of rollouts it created", () => {
    /** Which of a rollout's spans s1 and s2 the backend says are stored, with their sequence ids. */
    const existing = async (backend: StorageBackend, rolloutId: string) =>
      Object.fromEntries(
        await backend.transaction((t) =>
          t.existingSpans([
            [rolloutId, "at-1", "s1"],
            [rolloutId, "at-1", "s2"],
          ]),
        ),
      );
    /** Stores a span under the next `count` ids it takes (the last one). */
    const store = (t: StorageTx, rolloutId: string, spanId: string, count = 1) =>
      t.nextSequenceId(rolloutId, count).then((id) => t.insertSpans([span(rolloutId, "at-1", spanId, id)]));
    /** The last sequence id the file says the rollout issued: its counter, or its spans' largest id if larger. */
    const counterInFile = (path: string, rolloutId: string) => {
      const file = new Database(path, { readonly: true });
      try {
        return file.prepare(prepareStatements(file).lastSequenceId.source).pluck().get(rolloutId, rolloutId);
      } finally {
        file.close();
      }
    };

    it("agree with the file: after stores, raised counters, undone calls and another connection's writes", async () => {
      const path = join(dir, "spans.db");
      const [mine, other] = [createSqliteBackend({ path }), createSqliteBackend({ path })];
      await mine.transaction((t) => t.insertRollouts([rollout("ro-1"), rollout("ro-2")]));
      expect(await existing(mine, "ro-1")).toEqual({});
      expect(await mine.transaction((t) => store(t, "ro-1", "s1"))).toEqual([{ sequenceId: 1, duplicate: false }]);
      expect(await existing(mine, "ro-1")).toEqual({ "ro-1\0at-1\0s1": 1 });
      // Raised (never lowered) by explicit ids, as the file's counter is.
      await mine.transaction(async (t) => {
        await t.raiseSequenceId("ro-1", 7);
        await t.raiseSequenceId("ro-1", 3);
      });
      expect(counterInFile(path, "ro-1")).toBe(7);
      // Undone, alone and inside a group: neither the span nor the ids it took stay.
      const undone = () =>
        mine.transaction(async (t) => {
          await store(t, "ro-2", "s1");
          await t.raiseSequenceId("ro-2", 50);
          throw new Error("boom");
        });
      await expect(undone()).rejects.toThrow("boom");
      const grouped = await Promise.allSettled([undone(), existing(mine, "ro-2")]);
      expect(grouped[1]).toEqual({ status: "fulfilled", value: {} });
      expect(await mine.transaction((t) => store(t, "ro-2", "s1"))).toEqual([{ sequenceId: 1, duplicate: false }]);
      // Another connection takes ids and stores a span: this one reads the file again.
      await other.transaction((t) => store(t, "ro-1", "s2", 5));
      expect(await existing(mine, "ro-1")).toEqual({ "ro-1\0at-1\0s1": 1, "ro-1\0at-1\0s2": 12 });
      // (this helper takes an id before it stores: the store's calls look first, and take none for a stored span)
      expect(await mine.transaction((t) => store(t, "ro-1", "s2"))).toEqual([{ sequenceId: 12, duplicate: true }]);
      await Promise.all([mine.close(), other.close()]);
      expect([counterInFile(path, "ro-1"), counterInFile(path, "ro-2")]).toEqual([13, 1]);
    });

    it("write a counter only where no span they stored holds its value, and go on after the spans' ids once reopened", async () => {
      const path = join(dir, "counters.db");
      const rowsIn = (sql: string) => {
        const file = new Database(path, { readonly: true });
        try {
          return file.prepare(sql).raw().all();
        } finally {
          file.close();
        }
      };
      const first = createSqliteBackend({ path });
      await first.transaction((t) => t.insertRollouts(["ro-1", "ro-2", "ro-3", "ro-4"].map((id) => rollout(id))));
      // A batch's last span holds the counter's new value: no counter row.
      await first.transaction((t) => store(t, "ro-1", "s1", 3));
      await first.transaction((t) => store(t, "ro-4", "s1", 2));
      // Ids taken without a span, and a raise whose span turns out stored already: written.
      await first.transaction((t) => t.nextSequenceId("ro-2", 4));
      await first.transaction(async (t) => {
        await t.raiseSequenceId("ro-1", 9);
        await t.insertSpans([span("ro-1", "at-1", "s1", 9)]);
      });
      // A counter raised in a call after the span that held it: written, as the last value the call took.
      await first.transaction(async (t) => {
        await store(t, "ro-3", "s1");
        await t.nextSequenceId("ro-3", 2);
      });
      await first.close();
      expect(rowsIn("SELECT rollout_id, value FROM span_counters ORDER BY rollout_id")).toEqual([
        ["ro-1", 9],
        ["ro-2", 4],
        ["ro-3", 3],
      ]);
      // A new connection (an empty row cache) reads the larger of the counter and the spans' ids.
      const second = createSqliteBackend({ path });
      expect(await second.transaction((t) => store(t, "ro-3", "s2"))).toEqual([{ sequenceId: 4, duplicate: false }]);
      expect(await second.transaction((t) => store(t, "ro-1", "s2", 2))).toEqual([{ sequenceId: 11, duplicate: false }]);
      expect(await second.transaction((t) => t.nextSequenceId("ro-2", 1))).toBe(5);
      await second.close();
      const third = createSqliteBackend({ path });
      expect(await third.transaction((t) => t.nextSequenceId("ro-1", 1))).toBe(12);
      expect(await third.transaction((t) => t.nextSequenceId("ro-4", 1))).toBe(3);
      await third.close();
    });

    it("answer span queries from the spans they keep as the file does, and read the file once they cannot", async () => {
      const path = join(dir, "kept.db");
      const [mine, other] = [createSqliteBackend({ path, keepSpansAfterReadersMs: 500 }), createSqliteBackend({ path })];
      // Spans are kept for rollouts created while a reader asked for them.
      const release = mine.keepSpans?.() as () => void;
      await mine.transaction((t) => t.insertRollouts([rollout("ro-1"), rollout("ro-2"), rollout("ro-3")]));
      // As a server receives them: out of order, a tie (s1 and s3), two attempts.
      const received = (spans: Span[]) =>
        (
          decodeKeepingSpans(
            AddSpansRequestSchema,
            toBinary(AddSpansRequestSchema, create(AddSpansRequestSchema, { spans })),
          ) as AddSpansRequest
        ).spans;
      await mine.transaction((t) =>
        t.insertSpans(
          received([
            span("ro-1", "at-1", "s1", 3),
            span("ro-1", "at-2", "s2", 1),
            span("ro-1", "at-1", "s3", 3),
            span("ro-1", "at-1", "s4", 2),
          ]),
        ),
      );
      // One of ro-2's spans is a caller's object, which it changes later: ro-2's spans are not kept.
      const changed = span("ro-2", "at-1", "s2", 2);
      await mine.transaction((t) => t.insertSpans([...received([span("ro-2", "at-1", "s1", 1)]), changed]));
      changed.name = "changed later";
      const queries: Array<[Partial<SpanFilter>, Partial<PageSpec>]> = [
        [{}, {}],
        [{ attemptId: "at-1" }, {}],
        [{ attemptId: "at-2" }, { descending: true }],
        [{}, { descending: true }],
        [{ afterSequenceId: 2 }, {}],
        [{}, { limit: 2, offset: 1 }],
        [{}, { limit: 2, offset: 3 }],
        [{}, { limit: 0 }],
        [{ attemptId: "at-1" }, { offset: 7 }],
        [{ name: { contains: "s" } }, {}],
        [{}, { sortBy: "start_time" }],
        [{ rolloutId: "ro-2" }, {}],
      ];
      const ask = (backend: StorageBackend) =>
        backend.transaction((t) =>
          Promise.all(
            queries.map(([filter, page]) =>
              t.querySpans({ rolloutId: "ro-1", any: false, ...filter }, { descending: false, limit: -1, offset: 0, ...page }),
            ),
          ),
        );
      const fromFile = await ask(other);
      const kept = await ask(mine);
      expect(kept.map((r) => ({ ...r, items: r.items.map((s) => s.spanId) }))).toEqual(
        fromFile.map((r) => ({ ...r, items: r.items.map((s) => s.spanId) })),
      );
      expect(kept).toEqual(fromFile);
      expect(fromFile[0]?.items.map((s) => s.spanId)).toEqual(["s2", "s4", "s1", "s3"]);
      expect(kept.at(-1)?.items.map((s) => s.name)).toEqual(["span-s1", "span-s2"]);
      // The kept spans are handed out frozen (the file's are decoded afresh): those queries did not read the file.
      const frozen = kept.map((r) => r.items.length > 0 && r.items.every((s) => Object.isFrozen(s)));
      expect(frozen).toEqual([true, true, true, true, true, true, true, false, false, false, false, false]);
      expect(fromFile[0]?.items.some((s) => Object.isFrozen(s))).toBe(false);
      // Spans are kept only while a reader asked for them.
      const ro3 = (backend: StorageBackend) =>
        backend.transaction((t) => t.querySpans({ rolloutId: "ro-3", any: false }, { descending: false, limit: -1, offset: 0 }));
      await mine.transaction((t) => t.insertSpans(received([span("ro-3", "at-1", "s1", 1)])));
      expect((await ro3(mine)).items.every((s) => Object.isFrozen(s))).toBe(true);
      // Released: kept a while yet (a trainer's next stream follows soon), then dropped.
      release();
      release();
      expect((await ro3(mine)).items.every((s) => Object.isFrozen(s))).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect((await ro3(mine)).items.some((s) => Object.isFrozen(s))).toBe(false);
      await mine.transaction((t) => t.insertSpans(received([span("ro-3", "at-1", "s2", 2)])));
      mine.keepSpans?.();
      await mine.transaction((t) => t.insertSpans(received([span("ro-3", "at-1", "s3", 3)])));
      expect(await ro3(mine)).toEqual(await ro3(other));
      expect((await ro3(mine)).items.some((s) => Object.isFrozen(s))).toBe(false);
      // Another connection stores a span of the rollout: this one reads the file from then on.
      await other.transaction((t) => t.insertSpans([span("ro-1", "at-1", "s6", 4)]));
      const after = await ask(mine);
      expect(after).toEqual(await ask(other));
      expect(after[0]?.items.map((s) => s.spanId)).toEqual(["s2", "s4", "s1", "s3", "s6"]);
      expect(after[0]?.items.some((s) => Object.isFrozen(s))).toBe(false);
      await Promise.all([mine.close(), other.close()]);
    });

    it("keep spans within their budget, the oldest rollouts' dropped first", () => {
      const cache = new RowCache(1000);
      cache.keepSpans(true);
      const store = (rolloutId: string, spanId: string, bytes: number, keep = true) =>
        cache.spanStored(
          cache.spansOf(rolloutId) as RolloutSpans,
          rolloutId,
          spanId,
          1,
          keep ? span(rolloutId, "at-1", spanId, 1) : undefined,
          bytes,
        );
      const keptCounts = () => ["ro-1", "ro-2", "ro-3"].map((id) => cache.keptSpansOf(id)?.length);
      for (const id of ["ro-1", "ro-2", "ro-3"]) cache.rolloutCreated(id);
      store("ro-1", "s1", 400);
      store("ro-2", "s1", 400);
      store("ro-3", "s1", 100);
      expect(keptCounts()).toEqual([1, 1, 1]);
      store("ro-3", "s2", 200);
      expect(keptCounts()).toEqual([undefined, 1, 2]);
      // ro-1's spans are still known (which are stored), only not kept.
      expect(cache.spansOf("ro-1")?.stored.size).toBe(1);
      cache.forgetSpansOf("ro-2");
      store("ro-3", "s3", 600);
      expect(keptCounts()).toEqual([undefined, undefined, 3]);
      store("ro-3", "s4", 200);
      expect(keptCounts()).toEqual([undefined, undefined, undefined]);
      // A span that cannot be kept drops its rollout's, and frees their budget.
      cache.rolloutCreated("ro-4");
      cache.rolloutCreated("ro-5");
      store("ro-4", "s1", 900);
      store("ro-5", "s1", 50, false);
      store("ro-4", "s2", 100);
      expect([cache.keptSpansOf("ro-4")?.length, cache.keptSpansOf("ro-5"), cache.spansOf("ro-5")?.stored.size]).toEqual([2, undefined, 1]);
      // Stopped, it drops what it kept, and keeps nothing new.
      cache.rolloutCreated("ro-6");
      cache.keepSpans(false);
      store("ro-6", "s1", 10);
      expect([cache.keptSpansOf("ro-4"), cache.keptSpansOf("ro-6"), cache.spansOf("ro-4")?.stored.size]).toEqual([undefined, undefined, 2]);
    });

    it("know the spans of the rollouts of a deep queue as they run, and keep only those created while keeping went on", () => {
      const cache = new RowCache();
      const id = (i: number) => `ro-${String(i).padStart(6, "0")}`;
      // Twenty thousand rollouts queued, then run oldest first: each known to have no spans when its first batch comes.
      for (let i = 0; i < 20_000; i++) cache.rolloutCreated(id(i));
      expect(cache.spansOf(id(0))).toEqual({ counter: 0, stored: new Map(), kept: undefined, keptBytes: 0 });
      for (let i = 1; i < 10_000; i++) cache.spansOf(id(i));
      // Those asked about longest ago are forgotten first; the queue's rest is still known.
      expect([cache.spansOf(id(0)), cache.spansOf(id(9_999))?.counter, cache.spansOf(id(19_999))?.counter]).toEqual([undefined, 0, 0]);
      // Past the rollouts it remembers, the oldest created are forgotten.
      for (let i = 20_000; i < 20_000 + (1 << 16); i++) cache.rolloutCreated(id(i));
      expect([cache.spansOf(id(10_000)), cache.spansOf(id(20_000))?.counter]).toEqual([undefined, 0]);

      cache.keepSpans(true);
      for (const name of ["ro-a", "ro-b"]) cache.rolloutCreated(name);
      cache.keepSpans(false);
      cache.rolloutCreated("ro-c");
      cache.keepSpans(true);
      cache.rolloutCreated("ro-d");
      // ro-a and ro-b were created before keeping stopped, ro-c while it was stopped: only ro-d's spans are kept.
      expect(["ro-a", "ro-b", "ro-c", "ro-d"].map((name) => cache.keptSpansOf(name))).toEqual([undefined, undefined, undefined, []]);
    });
  });

  describe("rewrites of a row", () => {
    /**
     * Writes `first`, then each version in turn: the fifth through a second connection, so the write after it cannot
     * know the stored columns and writes them all. After each write, a third connection reads the row's columns from
     * the file (`sql`), and both connections must read the version back (`readBack`).
     */
    async function rewriteInTurn<T>(
      name: string,
      versions: T[],
      io: {
        put(t: StorageTx, version: T, first: boolean): Promise<void>;
        sql: string;
        columns(version: T): object;
        readBack(t: StorageTx): Promise<unknown[]>;
      },
    ) {
      const path = join(dir, `${name}.db`);
      const [mine, other] = [createSqliteBackend({ path }), createSqliteBackend({ path })];
      for (const [i, version] of versions.entries()) {
        await (i === 5 ? other : mine).transaction((t) => io.put(t, version, i === 0));
        const file = new Database(path, { readonly: true });
        const stored = file.prepare(io.sql).get();
        file.close();
        expect(stored).toEqual(io.columns(version));
        for (const backend of [mine, other]) {
          for (const read of await backend.transaction(io.readBack)) expect(read).toEqual(version);
        }
      }
      await Promise.all([mine.close(), other.close()]);
    }
    /** `first`, then `first` with each change on top of the ones before. */
    const versionsOf = <T extends object>(first: T, changes: object[], make: (init: object) => T) => {
      const versions = [first];
      for (const change of changes) versions.push(make({ ...versions.at(-1), ...change }));
      return versions;
    };

    it("set every rollout column that changed, alone or with others, whoever wrote the row before", async () => {
      const first = create(RolloutSchema, { rolloutId: "ro-1", startTime: 100, resourcesId: "rs-1", groupId: "g-1" });
      const changes = [
        { status: RolloutStatus.PREPARING },
        { status: RolloutStatus.RUNNING, startTime: 101 },
        { mode: RolloutMode.TRAIN },
        { resourcesId: "rs-2", resourcesVersion: 3 },
        { groupId: "g-2" },
        { metadata: { note: "changed only in data" } },
        { status: RolloutStatus.SUCCEEDED, endTime: 200, resourcesVersion: 4 },
        { endTime: undefined, mode: RolloutMode.VAL, groupId: "g-3" },
      ];
      await rewriteInTurn(
        "rollouts",
        versionsOf(first, changes, (init) => create(RolloutSchema, init)),
        {
          put: (t, rollout, isFirst) => (isFirst ? t.insertRollouts([rollout]) : t.putRollout(rollout)),
          sql: "SELECT status, start_time, end_time, mode, resources_id, resources_version, group_id FROM rollouts",
          columns: (r) => ({
            status: r.status,
            start_time: r.startTime,
            end_time: r.endTime ?? null,
            mode: r.mode,
            resources_id: r.resourcesId,
            resources_version: r.resourcesVersion,
            group_id: r.groupId,
          }),
          readBack: async (t) => [await t.getRollout("ro-1")],
        },
      );
    });

    it("set every attempt column that changed, alone or with others, whoever wrote the row before", async () => {
      const changes = [
        { status: AttemptStatus.RUNNING, lastHeartbeatTime: 150 },
        { lastHeartbeatTime: 151 },
        { workerId: "w-2", startTime: 120 },
        { sequenceId: 2 },
        { status: AttemptStatus.FAILED, endTime: 160 },
        { endTime: undefined, lastHeartbeatTime: undefined },
        { status: AttemptStatus.SUCCEEDED, endTime: 170, sequenceId: 3, workerId: "w-3" },
      ];
      const first = attempt("ro-1", "at-1", 1, { workerId: "w-1" });
      await rewriteInTurn(
        "attempts",
        versionsOf(first, changes, (init) => create(AttemptSchema, init)),
        {
          put: (t, a, isFirst) => (isFirst ? t.insertAttempt(a) : t.putAttempt(a)),
          sql: "SELECT sequence_id, start_time, end_time, status, worker_id, last_heartbeat_time FROM attempts",
          columns: (a) => ({
            sequence_id: a.sequenceId,
            start_time: a.startTime,
            end_time: a.endTime ?? null,
            status: a.status,
            worker_id: a.workerId,
            last_heartbeat_time: a.lastHeartbeatTime ?? null,
          }),
          readBack: async (t) => [await t.getAttempt("ro-1", "at-1"), (await t.latestAttempts(["ro-1"])).get("ro-1")],
        },
      );
    });
  });

  it("once busy, checkpoints on a worker thread, and leaves no WAL behind when closed", async () => {
    const path = join(dir, "checkpoints.db");
    const backend = createSqliteBackend({ path, backgroundCheckpointAfter: 5 });
    // ~0.9 MB in 30 commits, ~250 WAL frames: below SQLite's own threshold (1,000), so only the thread copies it back.
    const payload = { name: "x".repeat(15_000) };
    for (let i = 0; i < 30; i++) {
      await backend.transaction((t) => t.insertSpans([span("ro-1", "at-1", `s${i}`, i + 1, payload)]));
    }
    const deadline = Date.now() + 10_000;
    while (statSync(path).size < 800_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(statSync(path).size).toBeGreaterThan(800_000);
    await backend.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  it("under writes that never pause, restarts the WAL once it passes its limit, rather than letting it grow", async () => {
    const path = join(dir, "long-wal.db");
    // The thread notices a long WAL when it checkpoints: every 50 ms here, so several times within these writes.
    const backend = createSqliteBackend({ path, backgroundCheckpointAfter: 1, walRestartFrames: 64, checkpointIntervalMs: 50 });
    const payload = { name: "x".repeat(12_000) };
    const write = (id: string, sequenceId: number) =>
      backend.transaction((t) => t.insertSpans([span("ro-1", "at-1", id, sequenceId, payload)]));
    // The checkpoint thread starts after the first commit.
    await write("first", 1);
    await new Promise((r) => setTimeout(r, 300));
    /** How many times the WAL started over: its header's checkpoint sequence number. */
    const restarts = () => readFileSync(`${path}-wal`).readUInt32BE(12);
    // Then 8 calls of ~12 kB a commit, one commit after another: ~40 MB, ~10,000 WAL frames, with no pause. (The first
    // commit after the pause may restart the WAL by itself: the thread caught up meanwhile.)
    let before = 0;
    for (let wave = 0; wave < 400; wave++) {
      await Promise.all(Array.from({ length: 8 }, (_, i) => write(`s${wave}-${i}`, wave * 8 + i + 2)));
      if (wave === 0) before = restarts();
    }
    const after = restarts();
    expect((await backend.transaction((t) => t.counts())).spans).toBe(3201);
    await backend.close();
    // Without the pauses: none (the thread never catches up with writes that never pause); with them, one every time
    // the WAL passed 64 frames and the thread caught up (9 here).
    expect(after - before).toBeGreaterThanOrEqual(2);
  });

  /** Runs a script with a backend in a process of its own; what it exited with and printed. */
  const runScript = async (source: string) => {
    const child = scriptWithBackend(source);
    let out = "";
    let err = "";
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()));
    const code = await new Promise((resolve) => child.on("exit", resolve));
    return { code, out, err };
  };

  it("closing with the checkpoint thread running lets a process with nothing else to do finish its work", async () => {
    const path = join(dir, "exit.db");
    // The thread, unreferenced and still starting, must keep the process alive while close() awaits it (else: exit
    // code 13, a top-level await that never settled).
    const outcome = await runScript(
      `const backend = createSqliteBackend({ path: ${JSON.stringify(path)}, backgroundCheckpointAfter: 1 });
       for (let i = 0; i < 3; i++) await backend.transaction((tx) => tx.enqueue(["ro-" + i]));
       await backend.close();
       process.stdout.write("closed");`,
    );
    // Run as an ES module (`--input-type=module`), which the thread must not inherit.
    expect(outcome).toEqual({ code: 0, out: "closed", err: "" });
  });

  it("a transaction waiting for the WAL to restart keeps a process with nothing else to do alive", async () => {
    const path = join(dir, "exit-wal.db");
    const outcome = await runScript(
      `const backend = createSqliteBackend({ path: ${JSON.stringify(path)}, backgroundCheckpointAfter: 1, walRestartFrames: 2 });
       for (let i = 0; i < 3000; i++) await backend.transaction((tx) => tx.enqueue(["ro-" + i]));
       const { queueLength } = await backend.transaction((tx) => tx.counts());
       await backend.close();
       process.stdout.write(String(queueLength));`,
    );
    expect(outcome).toEqual({ code: 0, out: "3000", err: "" });
  });

  it("upgrades a version 1 database: spans stored before get their reward, token and call columns", async () => {
    const path = join(dir, "v1.db");
    const first = createSqliteBackend({ path });
    const rewardValue = create(AttributeValueSchema, { value: { case: "doubleValue", value: 0.5 } });
    const tokenIds = create(AttributeValueSchema, { value: { case: "intArray", value: { values: [1n, 2n, 3n] } } });
    await first.transaction(async (t) => {
      await t.insertResources(resources("rs-1"));
      await t.putResources(resources("rs-1", 2));
      await t.insertRollouts([rollout("ro-1", { status: RolloutStatus.SUCCEEDED })]);
      await t.insertAttempt(attempt("ro-1", "at-1", 1));
      // Two records of one call (its response id), and a record of another.
      const call = (id: string) => ({
        [AGL_LLM_RESPONSE_TOKEN_IDS]: tokenIds,
        [AGL_LLM_PROMPT_TOKEN_IDS]: tokenIds,
        [GEN_AI_RESPONSE_ID]: create(AttributeValueSchema, { value: { case: "stringValue", value: id } }),
      });
      await t.insertSpans([
        span("ro-1", "at-1", "llm", 1, { attributes: call("chatcmpl-1") }),
        span("ro-1", "at-1", "client", 2, { attributes: call("chatcmpl-1") }),
        span("ro-1", "at-1", "llm-2", 3, { attributes: call("chatcmpl-2") }),
        span("ro-1", "at-1", "reward", 4, { attributes: { [rewardValueKey(0)]: rewardValue } }),
      ]);
    });
    await first.close();
    // Back to version 1: without the columns and indexes version 2 added.
    const db = new Database(path);
    for (const index of ["rollouts_start", "rollouts_end", "rollouts_resources", "spans_reward", "spans_llm"])
      db.exec(`DROP INDEX ${index}`);
    db.exec("ALTER TABLE rollouts DROP COLUMN resources_version");
    db.exec("DROP TABLE resource_versions");
    for (const column of ["reward", "llm_prompt_tokens", "llm_response_tokens", "llm_call_key"])
      db.exec(`ALTER TABLE spans DROP COLUMN ${column}`);
    db.pragma("user_version = 1");
    db.close();

    const second = createSqliteBackend({ path });
    const found = await second.transaction(async (t) => ({
      rewards: await t.finalRewards(["ro-1"]),
      groups: await t.rewardGroups({}),
      history: (await t.queryResourceVersions("rs-1", all)).items.map((u) => u.version),
    }));
    await second.close();
    // Version 1 kept only the current version of each snapshot: the history starts there.
    expect(found.history).toEqual([2]);
    expect(found.rewards).toEqual(new Map([["ro-1", 0.5]]));
    expect(found.groups.map((g) => [g.rollouts, g.rewarded, g.rewardSum, g.llmCalls, g.promptTokens, g.responseTokens])).toEqual([
      [1, 1, 0.5, 2, 6, 6],
    ]);
  });

  it("refuses a database with a newer schema", () => {
    const path = join(dir, "future.db");
    const db = new Database(path);
    db.pragma("user_version = 99");
    db.close();
    expect(() => createSqliteBackend({ path })).toThrow(/schema version 99/);
  });

  it("reads a rollout's latest attempt from the index alone, without sorting (read for every rollout a call returns)", () => {
    const db = new Database(":memory:");
    openSchema(db);
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${prepareStatements(db).latestAttempt.source}`).all("ro-1") as { detail: string }[];
    db.close();
    expect(plan.map((step) => step.detail)).toEqual(["SEARCH attempts USING INDEX attempts_sequence (rollout_id=?)"]);
  });

  it("counts finished rollouts by end time from the index of finished rollouts alone", () => {
    const db = new Database(":memory:");
    openSchema(db);
    const { text, values } = aggregates.timeline({ start: 0, end: 100, bucketSeconds: 10, scope: {} }, "end_time");
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...values) as { detail: string }[];
    const indexed = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'rollouts_end'").pluck().get();
    db.close();
    expect(plan.map((step) => step.detail)).toContain("SEARCH rollouts USING COVERING INDEX rollouts_end (end_time>? AND end_time<?)");
    expect(indexed).toMatch(/WHERE end_time IS NOT NULL$/);
  });

  it("sums LLM calls from the index of LLM spans alone, the rollouts in scope found by id", () => {
    const db = new Database(":memory:");
    openSchema(db);
    const { text, values } = aggregates.tokens({});
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...values) as { detail: string }[]).map((step) => step.detail);
    db.close();
    expect(plan).toContain("SCAN s USING COVERING INDEX spans_llm");
    expect(plan).toContain("SEARCH rollouts USING INDEX sqlite_autoindex_rollouts_1 (rollout_id=?)");
  });

  it("upgrades a version 4 database: LLM spans stored before get their call key, and each call counts once", async () => {
    const path = join(dir, "v4.db");
    const first = createSqliteBackend({ path });
    const ids = (n: number) => create(AttributeValueSchema, { value: { case: "intArray", value: { values: Array(n).fill(1n) } } });
    const call = (id: string | undefined, prompt: number, response: number) => ({
      attributes: {
        [AGL_LLM_PROMPT_TOKEN_IDS]: ids(prompt),
        [AGL_LLM_RESPONSE_TOKEN_IDS]: ids(response),
        ...(id === undefined ? {} : { [GEN_AI_RESPONSE_ID]: create(AttributeValueSchema, { value: { case: "stringValue", value: id } }) }),
      },
    });
    await first.transaction(async (t) => {
      await t.insertRollouts([rollout("ro-1", { status: RolloutStatus.SUCCEEDED })]);
      await t.insertAttempt(attempt("ro-1", "at-1", 1));
      await t.insertSpans([
        span("ro-1", "at-1", "proxy", 1, call("chatcmpl-1", 5, 2)),
        span("ro-1", "at-1", "client", 2, call("chatcmpl-1", 5, 2)),
        span("ro-1", "at-1", "bare-1", 3, call(undefined, 4, 1)),
        span("ro-1", "at-1", "bare-2", 4, call(undefined, 4, 1)),
      ]);
    });
    await first.close();
    const db = new Database(path);
    undoVersion5(db);
    db.pragma("user_version = 4");
    db.close();

    const second = createSqliteBackend({ path });
    const groups = await second.transaction((t) => t.rewardGroups({}));
    await second.close();
    const upgraded = new Database(path, { readonly: true });
    const keys = upgraded.prepare("SELECT llm_call_key FROM spans ORDER BY sequence_id").pluck().all();
    upgraded.close();
    expect(keys).toEqual(["response:chatcmpl-1", "response:chatcmpl-1", "span:at-1/bare-1", "span:at-1/bare-2"]);
    expect(groups.map((g) => [g.llmCalls, g.promptTokens, g.responseTokens])).toEqual([[3, 13, 4]]);
  });

  it("upgrades a version 3 database: the index of finished rollouts keeps them and leaves out the others", async () => {
    const path = join(dir, "v3.db");
    const first = createSqliteBackend({ path });
    await first.transaction((t) =>
      t.insertRollouts([
        rollout("ro-1", { status: RolloutStatus.SUCCEEDED, endTime: 15 }),
        rollout("ro-2", { status: RolloutStatus.FAILED, endTime: 25 }),
        rollout("ro-3", { status: RolloutStatus.RUNNING }),
      ]),
    );
    await first.close();
    // The index's entries, counted on its B-tree's pages (not through a query, which a range on end_time limits).
    const indexEntries = (db: Database.Database) =>
      db.prepare("SELECT sum(ncell) FROM dbstat WHERE name = 'rollouts_end' AND pagetype = 'leaf'").pluck().get();
    // Back to version 3: every rollout in the index.
    const db = new Database(path);
    undoVersion5(db);
    db.exec("DROP INDEX rollouts_end; CREATE INDEX rollouts_end ON rollouts (end_time, mode, status)");
    db.pragma("user_version = 3");
    expect(indexEntries(db)).toBe(3);
    db.close();

    const second = createSqliteBackend({ path });
    const timeline = await second.transaction((t) => t.rolloutTimeline({ start: 0, end: 100, bucketSeconds: 10, scope: {} }));
    await second.close();
    const upgraded = new Database(path, { readonly: true });
    const entries = indexEntries(upgraded);
    expect(upgraded.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    upgraded.close();
    expect(entries).toBe(2);
    expect(timeline.finished.map((b) => [b.bucket, b.status, b.count]).sort()).toEqual([
      [1, RolloutStatus.SUCCEEDED, 1],
      [2, RolloutStatus.FAILED, 1],
    ]);
  });

  it("reads a rollout's last sequence id from its counter's key and the spans' index alone", () => {
    const db = new Database(":memory:");
    openSchema(db);
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${prepareStatements(db).lastSequenceId.source}`).all("ro-1", "ro-1") as {
      detail: string;
    }[];
    db.close();
    expect(plan.map((step) => step.detail).filter((detail) => detail.startsWith("SEARCH") || detail.startsWith("SCAN "))).toEqual([
      "SCAN CONSTANT ROW",
      "SEARCH span_counters USING PRIMARY KEY (rollout_id=?)",
      "SEARCH spans USING COVERING INDEX spans_sequence (rollout_id=?)",
    ]);
  });
});
