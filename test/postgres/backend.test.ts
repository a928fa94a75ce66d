/**
 * The PostgreSQL backend's own behaviour, below the store: schema versions, URL parameters, event delivery,
 * conflicts and row locking, the watchdog's advisory lock, collation, NOTIFY payloads, reconnecting, closing.
 * (The store-level contract is the conformance suite's, which runs on PostgreSQL too.)
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import {
  AttemptSchema,
  type AttributeValue,
  AttributeValueSchema,
  ResourcesUpdateSchema,
  RolloutSchema,
  RolloutStatus,
  SpanSchema,
} from "../../src/gen/agl/v1/types_pb.js";
import { AGL_LLM_PROMPT_TOKEN_IDS, AGL_LLM_RESPONSE_TOKEN_IDS, GEN_AI_RESPONSE_ID, rewardValueKey } from "../../src/core/semconv.js";
import type { StorageBackend, StorageTx, StoreEvent } from "../../src/store/backend.js";
import { createPostgresBackend, type PostgresBackendOptions } from "../../src/store/backends/postgres/postgres-backend.js";
import { encodeEvents } from "../../src/store/backends/postgres/postgres-events.js";
import { SCHEMA_VERSION } from "../../src/store/backends/postgres/postgres-schema.js";
import { aggregatesOf } from "../../src/store/backends/postgres/postgres-queries.js";
import { createStore } from "../../src/store/store.js";
import { expectCode, makeSpan, sleep } from "../conformance/harness.js";
import { adminQuery, dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A schema dropped after the test. */
function schema(): string {
  const name = freshSchema();
  cleanups.push(() => dropSchema(name));
  return name;
}

async function open(name: string, options: Partial<PostgresBackendOptions> = {}): Promise<StorageBackend> {
  const backend = await createPostgresBackend({ connectionString: postgresUrl(), schema: name, poolSize: 4, ...options });
  cleanups.push(() => backend.close());
  return backend;
}

const rollout = (rolloutId: string, init: object = {}) =>
  create(RolloutSchema, { rolloutId, startTime: 100, status: RolloutStatus.QUEUING, ...init });
const all = { descending: false, limit: -1, offset: 0 };

/** Resolves when `n` calls arrived, or after `ms` (a barrier that a blocked party cannot deadlock). */
function barrier(n: number, ms: number) {
  let arrived = 0;
  let release = () => {};
  const open = new Promise<void>((resolve) => {
    release = resolve;
    setTimeout(resolve, ms);
  });
  return () => {
    if (++arrived >= n) release();
    return open;
  };
}

/** Takes a schema of this version back to version 3: no call keys, and the index of LLM spans as it was. */
async function undoVersion4(name: string): Promise<void> {
  await adminQuery(`DROP INDEX ${name}.spans_llm`);
  await adminQuery(`ALTER TABLE ${name}.spans DROP COLUMN llm_call_key`);
  await adminQuery(
    `CREATE INDEX spans_llm ON ${name}.spans (rollout_id, llm_prompt_tokens, llm_response_tokens) WHERE llm_response_tokens IS NOT NULL`,
  );
}

describe("PostgreSQL backend", () => {
  it("upgrades a version 1 schema: spans stored before get their reward, token and call columns", async () => {
    const name = schema();
    const first = await open(name);
    const rewardValue = create(AttributeValueSchema, { value: { case: "doubleValue", value: 0.5 } });
    const tokenIds = create(AttributeValueSchema, { value: { case: "intArray", value: { values: [1n, 2n, 3n] } } });
    const span = (spanId: string, sequenceId: number, attributes: Record<string, AttributeValue>) =>
      create(SpanSchema, { ...makeSpan("ro-1", "at-1", { spanId, sequenceId }), attributes });
    await first.transaction(async (t) => {
      await t.insertResources(create(ResourcesUpdateSchema, { resourcesId: "rs-1", version: 1 }));
      await t.putResources(create(ResourcesUpdateSchema, { resourcesId: "rs-1", version: 2 }));
      await t.insertRollouts([rollout("ro-1", { status: RolloutStatus.SUCCEEDED })]);
      await t.insertAttempt(create(AttemptSchema, { rolloutId: "ro-1", attemptId: "at-1", sequenceId: 1, startTime: 100 }));
      // Two records of one call (its response id), and a record of another.
      const call = (id: string) => ({
        [AGL_LLM_RESPONSE_TOKEN_IDS]: tokenIds,
        [AGL_LLM_PROMPT_TOKEN_IDS]: tokenIds,
        [GEN_AI_RESPONSE_ID]: create(AttributeValueSchema, { value: { case: "stringValue", value: id } }),
      });
      await t.insertSpans([
        span("00000000000000a1", 1, call("chatcmpl-1")),
        span("00000000000000a3", 2, call("chatcmpl-1")),
        span("00000000000000a4", 3, call("chatcmpl-2")),
        span("00000000000000a2", 4, { [rewardValueKey(0)]: rewardValue }),
      ]);
    });
    await first.close();
    // Back to version 1: without the indexes and columns version 2 added.
    await adminQuery(`DROP INDEX ${name}.rollouts_start, ${name}.rollouts_end, ${name}.attempts_latest`);
    await adminQuery(`ALTER TABLE ${name}.rollouts DROP COLUMN resources_version`);
    await adminQuery(
      `ALTER TABLE ${name}.spans DROP COLUMN reward, DROP COLUMN llm_prompt_tokens, DROP COLUMN llm_response_tokens, DROP COLUMN llm_call_key`,
    );
    await adminQuery(`DELETE FROM ${name}.resource_versions`);
    await adminQuery(`UPDATE ${name}.schema_version SET version = 1`);

    const second = await open(name);
    const found = await second.transaction(async (t) => ({
      rewards: await t.finalRewards(["ro-1"]),
      groups: await t.rewardGroups({}),
      history: (await t.queryResourceVersions("rs-1", all)).items.map((u) => u.version),
    }));
    // Version 1 pruned its history of versions: the current version of each snapshot is put back.
    expect(found.history).toEqual([2]);
    expect(found.rewards).toEqual(new Map([["ro-1", 0.5]]));
    expect(found.groups.map((g) => [g.rollouts, g.rewarded, g.rewardSum, g.llmCalls, g.promptTokens, g.responseTokens])).toEqual([
      [1, 1, 0.5, 2, 6, 6],
    ]);
  });

  it("refuses a schema written by a newer version of agl", async () => {
    const name = schema();
    await (await open(name)).close();
    await adminQuery(`UPDATE ${name}.schema_version SET version = 99`);
    await expect(createPostgresBackend({ connectionString: postgresUrl(), schema: name })).rejects.toThrow(
      new RegExp(`schema .* has version 99, newer than this program's ${SCHEMA_VERSION}`),
    );
  });

  it("keeps only finished rollouts in the index of end times, and the timeline's finished counts read it", async () => {
    const name = schema();
    await (await open(name)).close();
    const { text, values } = aggregatesOf(name).timeline({ start: 0, end: 100, bucketSeconds: 10, scope: {} }, "end_time");
    const client = new pg.Client({ connectionString: postgresUrl() });
    await client.connect();
    try {
      // An empty table: without this the planner reads it whole, whatever the indexes.
      await client.query("SET enable_seqscan = off");
      const plan = (await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, values)).rows.map((row) => row["QUERY PLAN"]);
      expect(plan.join("\n")).toMatch(/Index (Only )?Scan (on|using) rollouts_end/);
      const [row] = (await client.query<{ def: string }>(`SELECT pg_get_indexdef('${name}.rollouts_end'::regclass) AS def`)).rows;
      expect(row?.def).toMatch(/WHERE \(end_time IS NOT NULL\)$/);
    } finally {
      await client.end();
    }
  });

  it("upgrades a version 2 schema: the index of end times leaves out unfinished rollouts", async () => {
    const name = schema();
    const first = await open(name);
    await first.transaction((t) =>
      t.insertRollouts([
        rollout("ro-1", { status: RolloutStatus.SUCCEEDED, endTime: 15 }),
        rollout("ro-2", { status: RolloutStatus.FAILED, endTime: 25 }),
        rollout("ro-3", { status: RolloutStatus.RUNNING }),
      ]),
    );
    await first.close();
    const definition = async () =>
      (await adminQuery<{ def: string }>(`SELECT pg_get_indexdef('${name}.rollouts_end'::regclass) AS def`))[0]?.def;
    // Back to version 2: every rollout in the index.
    await undoVersion4(name);
    await adminQuery(`DROP INDEX ${name}.rollouts_end`);
    await adminQuery(`CREATE INDEX rollouts_end ON ${name}.rollouts (end_time, mode, status)`);
    await adminQuery(`UPDATE ${name}.schema_version SET version = 2`);
    expect(await definition()).not.toMatch(/WHERE/);

    const second = await open(name);
    const timeline = await second.transaction((t) => t.rolloutTimeline({ start: 0, end: 100, bucketSeconds: 10, scope: {} }));
    expect(await definition()).toMatch(/WHERE \(end_time IS NOT NULL\)$/);
    expect((await adminQuery<{ version: number }>(`SELECT version FROM ${name}.schema_version`))[0]?.version).toBe(SCHEMA_VERSION);
    expect(timeline.finished.map((b) => [b.bucket, b.status, b.count]).sort()).toEqual([
      [1, RolloutStatus.SUCCEEDED, 1],
      [2, RolloutStatus.FAILED, 1],
    ]);
  });

  it("takes schema and pool_size from the URL, and finds its data again after reopening", async () => {
    const name = schema();
    const first = await createPostgresBackend({ connectionString: `${postgresUrl()}?schema=${name}&pool_size=2` });
    await first.transaction((tx) => tx.insertRollouts([rollout("ro-kept")]));
    await first.close();
    const second = await open(name);
    expect((await second.transaction((tx) => tx.getRollout("ro-kept")))?.rolloutId).toBe("ro-kept");
    await expect(createPostgresBackend({ connectionString: `${postgresUrl()}?pool_size=0` })).rejects.toThrow(/pool_size/);
  });

  it("is UNAVAILABLE, with the reason, when the database cannot be reached", async () => {
    const error = await createPostgresBackend({ connectionString: "postgres://postgres@127.0.0.1:1/agl" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    expect((error as ConnectError).rawMessage).toMatch(/database is unavailable \(connect ECONNREFUSED/);
  });

  it("delivers a transaction's events to every server before the transaction returns, and none on rollback", async () => {
    const name = schema();
    const [a, b] = [await open(name), await open(name)];
    const seenA: StoreEvent[] = [];
    const seenB: StoreEvent[] = [];
    a.subscribe((e) => seenA.push(e));
    b.subscribe((e) => seenB.push(e));
    await a.transaction(async (tx) => {
      await tx.insertRollouts([rollout("ro-1")]);
      tx.notify({ kind: "queued" });
      tx.notify({ kind: "finished", rolloutIds: ["ro-1"] });
      tx.notify({ kind: "queued" });
    });
    // Its own events have arrived by the time the transaction returns, deduplicated, in order.
    expect(seenA).toEqual([{ kind: "queued" }, { kind: "finished", rolloutIds: ["ro-1"] }]);
    await expect(
      a.transaction(async (tx) => {
        tx.notify({ kind: "finished", rolloutIds: ["ro-2"] });
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    await b.transaction(async (tx) => tx.notify({ kind: "finished", rolloutIds: ["ro-3"] }));
    expect(seenB).toEqual([{ kind: "queued" }, { kind: "finished", rolloutIds: ["ro-1"] }, { kind: "finished", rolloutIds: ["ro-3"] }]);
    await sleep(100);
    expect(seenA).toHaveLength(3);
  });

  it("runs a transaction again when another one wrote the same row meanwhile, keeping both updates", async () => {
    const name = schema();
    const backend = await open(name);
    await backend.transaction((tx) => tx.insertRollouts([rollout("ro-1")]));
    const bothRead = barrier(2, 2_000);
    let runs = 0;
    const update = (key: string) =>
      backend.transaction(async (tx) => {
        runs++;
        const r = (await tx.getRollout("ro-1"))!;
        await bothRead(); // both read the same version before either writes it back
        r.metadata = { ...r.metadata, [key]: true };
        await tx.putRollout(r);
      });
    await Promise.all([update("a"), update("b")]);
    expect(runs).toBe(3); // the later writer ran again
    const stored = await backend.transaction((tx) => tx.getRollout("ro-1"));
    expect(Object.keys(stored!.metadata ?? {}).sort()).toEqual(["a", "b"]);
  });

  it("with alwaysLock, read-modify-write transactions queue on the row instead of failing", async () => {
    const name = schema();
    const backend = await open(name, { alwaysLock: true });
    await backend.transaction((tx) => tx.insertRollouts([rollout("ro-1")]));
    const bothRead = barrier(2, 300); // the second reader waits for the first to commit: the barrier times out
    let runs = 0;
    const update = (key: string) =>
      backend.transaction(async (tx) => {
        runs++;
        const r = (await tx.getRollout("ro-1"))!;
        await bothRead();
        r.metadata = { ...r.metadata, [key]: true };
        await tx.putRollout(r);
      });
    await Promise.all([update("a"), update("b")]);
    expect(runs).toBe(2);
    const stored = await backend.transaction((tx) => tx.getRollout("ro-1"));
    expect(Object.keys(stored!.metadata ?? {}).sort()).toEqual(["a", "b"]);
  });

  it("with the caller's hint, writers lock rows from the first run and readers read one snapshot without locks", async () => {
    const name = schema();
    const backend = (await open(name)) as StorageBackend & {
      transaction<T>(fn: (tx: StorageTx) => Promise<T>, options?: { readOnly?: boolean }): Promise<T>;
    };
    await backend.transaction((tx) => tx.insertRollouts([rollout("ro-1")]));
    const bothRead = barrier(2, 300);
    let runs = 0;
    const update = (key: string) =>
      backend.transaction(
        async (tx) => {
          runs++;
          const r = (await tx.getRollout("ro-1"))!;
          await bothRead();
          r.metadata = { ...r.metadata, [key]: true };
          await tx.putRollout(r);
        },
        { readOnly: false },
      );
    // A reader holding its snapshot neither waits for the writers nor sees their commits.
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const reader = backend.transaction(
      async (tx) => {
        const before = await tx.getRollout("ro-1");
        await held;
        return [before, await tx.getRollout("ro-1")];
      },
      { readOnly: true },
    );
    await Promise.all([update("a"), update("b")]);
    release();
    const [before, after] = await reader;
    expect(after).toEqual(before);
    expect(runs).toBe(2);
    const stored = await backend.transaction((tx) => tx.getRollout("ro-1"), { readOnly: true });
    expect(Object.keys(stored!.metadata ?? {}).sort()).toEqual(["a", "b"]);
    await expect(backend.transaction((tx) => tx.putRollout(stored!), { readOnly: true })).rejects.toThrow(/read-only/);
  });

  it("the watchdog's candidates go to one server at a time", async () => {
    const name = schema();
    const [a, b] = [await open(name), await open(name)];
    await a.transaction((tx) => tx.insertRollouts([rollout("ro-1", { status: RolloutStatus.RUNNING })]));
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const scanning = a.transaction(async (tx) => {
      const found = await tx.activeRollouts();
      await held;
      return found.map((r) => r.rolloutId);
    });
    await sleep(200);
    expect(await b.transaction((tx) => tx.activeRollouts())).toEqual([]);
    release();
    expect(await scanning).toEqual(["ro-1"]);
    expect((await b.transaction((tx) => tx.activeRollouts())).map((r) => r.rolloutId)).toEqual(["ro-1"]);
  });

  it("sorts text by code point, as the other backends do, whatever the database's locale", async () => {
    const backend = await open(schema());
    const ids = ["ro-b", "ro-B", "ro-_", "ro-a", "ro-A", "ro-é", "ro-0"];
    await backend.transaction((tx) => tx.insertRollouts(ids.map((id) => rollout(id))));
    const sorted = await backend.transaction((tx) => tx.queryRollouts({ any: false }, { ...all, sortBy: "rollout_id" }));
    expect(sorted.items.map((r) => r.rolloutId)).toEqual([...ids].sort());
    const contains = await backend.transaction((tx) => tx.queryRollouts({ any: false, rolloutIdContains: "_" }, all));
    expect(contains.items.map((r) => r.rolloutId)).toEqual(["ro-_"]); // literal, not a LIKE wildcard
  });

  it("reports duplicate spans within a batch and against stored ones", async () => {
    const backend = await open(schema());
    const span = (spanId: string, sequenceId: number) =>
      create(SpanSchema, { rolloutId: "ro-1", attemptId: "at-1", spanId, sequenceId, name: spanId });
    const first = await backend.transaction((tx) => tx.insertSpans([span("a", 1), span("b", 2), span("a", 3)]));
    expect(first).toEqual([
      { sequenceId: 1, duplicate: false },
      { sequenceId: 2, duplicate: false },
      { sequenceId: 1, duplicate: true },
    ]);
    const second = await backend.transaction((tx) => tx.insertSpans([span("b", 9), span("c", 10)]));
    expect(second).toEqual([
      { sequenceId: 2, duplicate: true },
      { sequenceId: 10, duplicate: false },
    ]);
  });

  it("refuses text with NUL characters as INVALID_ARGUMENT, storing nothing", async () => {
    const store = createStore({ backend: await open(schema()), watchdogIntervalSeconds: 0 });
    const r = await store.startRollout({ rollout: {} });
    const span = makeSpan(r.rolloutId, r.latestAttempt!.attemptId, { name: "a\u0000b" });
    await expectCode(store.addSpans({ spans: [span] }), Code.InvalidArgument, "NUL");
    expect((await store.querySpans({ rolloutId: r.rolloutId })).spans).toEqual([]);
  });

  it("a failed write rolls the whole transaction back", async () => {
    const backend = await open(schema());
    await backend.transaction((tx) => tx.insertRollouts([rollout("ro-1")]));
    await expect(
      backend.transaction(async (tx) => {
        await tx.enqueue(["ro-2"]);
        await tx.insertRollouts([rollout("ro-2"), rollout("ro-1")]); // a duplicate key, sent without waiting
        return tx.counts();
      }),
    ).rejects.toThrow(/duplicate key/);
    const counts = await backend.transaction((tx) => tx.counts());
    expect(counts).toMatchObject({ rollouts: 1, queueLength: 0 });
  });

  it("its LISTEN connection comes back after being cut, and makes up for what it missed, once", async () => {
    const name = schema();
    const [a, b] = [await open(name), await open(name)];
    const seen: StoreEvent[] = [];
    a.subscribe((e) => seen.push(e));
    const publish = (i: number) => {
      const update = create(ResourcesUpdateSchema, { resourcesId: `rs-${i}`, version: 1, createTime: i, updateTime: i });
      return b.transaction(async (tx) => {
        await tx.insertResources(update);
        tx.notify({ kind: "resources", update });
      });
    };
    const resources = () => seen.flatMap((e) => (e.kind === "resources" ? [e.update.resourcesId] : []));
    // Versions published before the cut, while it is down, and around the reconnect, where a version committed
    // between LISTEN and the catch-up's query reaches it both ways: each must be delivered exactly once.
    const total = 400;
    for (let i = 1; i <= 5; i++) await publish(i);
    await adminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1", [`LISTEN "agl.${name}"`]);
    let next = 6;
    const writer = async () => {
      while (next <= total) await publish(next++);
    };
    await Promise.all([writer(), writer(), writer(), writer()]);
    const deadline = Date.now() + 10_000;
    while (resources().length < total && Date.now() < deadline) await sleep(50);
    await sleep(200); // a second delivery would come by now
    const expected = Array.from({ length: total }, (_, i) => `rs-${i + 1}`);
    expect(resources().sort()).toEqual(expected.sort());
    expect(seen.some((e) => e.kind === "queued")).toBe(true); // waiting dequeues look again
    await b.transaction(async (tx) => tx.notify({ kind: "finished", rolloutIds: ["ro-9"] }));
    while (!seen.some((e) => e.kind === "finished") && Date.now() < deadline) await sleep(50);
    expect(seen.some((e) => e.kind === "finished")).toBe(true);
  });

  it("close lets transactions in flight finish and refuses new ones as UNAVAILABLE", async () => {
    const backend = await createPostgresBackend({ connectionString: postgresUrl(), schema: schema() });
    const pending = backend.transaction(async (tx) => {
      await sleep(50);
      await tx.insertRollouts([rollout("ro-1")]);
      return "done";
    });
    const closed = backend.close();
    await expect(pending).resolves.toBe("done");
    await closed;
    await expectCode(
      backend.transaction(async () => 1),
      Code.Unavailable,
      "closed",
    );
    await backend.close();
  });
});

describe("NOTIFY payloads", () => {
  const seq = () => 7;
  it("fit PostgreSQL's 8,000 bytes: large versions by reference, long id lists split; the last carries the token", () => {
    const small = create(ResourcesUpdateSchema, { resourcesId: "rs-s", version: 2 });
    const large = create(ResourcesUpdateSchema, {
      resourcesId: "rs-l",
      version: 3,
      resources: { r: { kind: { case: "promptTemplate", value: { template: "x".repeat(20_000) } } } },
    });
    const ids = Array.from({ length: 2_000 }, (_, i) => `ro-${String(i).padStart(12, "0")}`);
    const payloads = encodeEvents(
      [
        { kind: "queued" },
        { kind: "resources", update: small },
        { kind: "queued" },
        { kind: "resources", update: large },
        { kind: "finished", rolloutIds: ids },
      ],
      seq,
      "tok.1",
    );
    for (const p of payloads) expect(Buffer.byteLength(p)).toBeLessThanOrEqual(7_900);
    const parsed = payloads.map((p) => JSON.parse(p) as Record<string, unknown>);
    expect(parsed[0]).toEqual({ k: "q" });
    expect(parsed[1]).toMatchObject({ k: "r", id: "rs-s", v: 2, s: 7 });
    expect(typeof parsed[1]!.d).toBe("string");
    expect(parsed[2]).toEqual({ k: "r", id: "rs-l", v: 3, s: 7 });
    const finished = parsed.slice(3);
    expect(finished.length).toBeGreaterThan(1);
    expect(finished.flatMap((p) => p.ids as string[])).toEqual(ids);
    expect(parsed.at(-1)!.o).toBe("tok.1");
    expect(parsed.slice(0, -1).every((p) => p.o === undefined)).toBe(true);
  });
});
