/** TripletService over a real server: order, resume by cursor, follow, filters, backpressure, unary RPCs. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { createStoreClient } from "../../src/client/store-client.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type RewardMatch, type StreamTripletsResponse, TripletMode } from "../../src/gen/agl/v1/triplets_pb.js";
import { AttemptStatus, RolloutMode, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import type { StoreApi } from "../../src/store/store-api.js";
import type { StorageTx, TransactionOptions } from "../../src/store/backend.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { createTripletClient, type TripletClient } from "../../src/triplets/triplet-client.js";
import { type ClaimedRollout, claimWithSpans, finish } from "../support/triplet-fixtures.js";

let store: Store;
let server: StoreServer;
let client: TripletClient;
let spanReads = 0;
let rolloutReads = 0;

beforeEach(async () => {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  // Counts how many rollouts the service built (one span read each, through the store or, in its process, the
  // backend), to observe backpressure.
  const countedTx = (tx: StorageTx) =>
    new Proxy(tx, {
      get(target, key, receiver) {
        if (key === "querySpans") spanReads++;
        return Reflect.get(target, key, receiver);
      },
    });
  const backend = new Proxy(store.backend, {
    get(target, key, receiver) {
      if (key === "transaction")
        return (fn: (tx: StorageTx) => Promise<unknown>, options?: TransactionOptions) =>
          target.transaction((tx) => fn(countedTx(tx)), options);
      return Reflect.get(target, key, receiver);
    },
  });
  const counted = new Proxy(store, {
    get(target, key, receiver) {
      if (key === "backend") return backend;
      if (key === "querySpans")
        return (...args: Parameters<StoreApi["querySpans"]>) => {
          spanReads++;
          return target.querySpans(...args);
        };
      if (key === "queryRollouts")
        return async (...args: Parameters<StoreApi["queryRollouts"]>) => {
          const page = await target.queryRollouts(...args);
          rolloutReads += page.rollouts.length;
          return page;
        };
      return Reflect.get(target, key, receiver);
    },
  }) as StoreApi;
  spanReads = 0;
  rolloutReads = 0;
  // No full pass within a test: what a following stream reads comes from the store's events alone.
  server = await startStoreServer({ store: counted, port: 0, triplets: { pollIntervalMs: 50, fullPassMs: 60_000 } });
  client = createTripletClient({ baseUrl: server.url });
});
afterEach(async () => {
  client.close();
  await server.close();
  await store.close();
});

/** Reads a stream until `stop` says so (then cancels it) or it ends. */
async function read(request: Parameters<TripletClient["streamTriplets"]>[0], stop?: (got: StreamTripletsResponse[]) => boolean) {
  const abort = new AbortController();
  const got: StreamTripletsResponse[] = [];
  try {
    for await (const message of client.streamTriplets(request, { signal: abort.signal, timeoutMs: 20_000 })) {
      got.push(message);
      if (stop?.(got)) abort.abort();
    }
  } catch (error) {
    if (ConnectError.from(error).code !== Code.Canceled) throw error;
  }
  return got;
}
const ids = (got: StreamTripletsResponse[]) => got.flatMap((m) => (m.rollout ? [m.rollout.rolloutId] : []));

describe("StreamTriplets", () => {
  it("sends finished rollouts in creation order with their triplets, then caught_up", async () => {
    const rs = await claimWithSpans(store, 5, { calls: 2 });
    for (const i of [3, 0, 4]) await finish(store, rs[i]!);
    const got = await read({});
    expect(ids(got)).toEqual([0, 3, 4].map((i) => rs[i]!.rolloutId));
    expect(got.at(-1)?.caughtUp).toBe(true);
    expect(got.at(-1)?.rollout).toBeUndefined();
    const first = got[0]!.rollout!;
    expect(first.triplets.map((t) => [t.promptTokenIds, t.responseTokenIds])).toEqual(
      rs[0]!.prompts.map((p, c) => [p, rs[0]!.responses[c]]),
    );
    expect(first.triplets.map((t) => t.turnIndex)).toEqual([0, 1]);
    expect(first).toMatchObject({ status: RolloutStatus.SUCCEEDED, attemptId: rs[0]!.attemptId, finalReward: 0 });
    expect(got[1]!.rollout!.triplets.map((t) => t.reward)).toEqual([undefined, 0.3]);
    expect(got[1]!.rollout!.triplets.every((t) => t.finalReward === 0.3 && t.logprobs.length === 3)).toBe(true);
  });

  it("resumes after a disconnect from the last cursor: nothing lost, nothing repeated, out-of-order finishes included", async () => {
    const rs = await claimWithSpans(store, 12, { calls: 1 });
    const order = [5, 1, 0, 7, 2, 9, 11, 3];
    for (const i of order) await finish(store, rs[i]!);
    const seen: string[] = [];
    // Disconnect after 3 rollouts.
    const part1 = await read({}, (got) => ids(got).length === 3);
    seen.push(...ids(part1));
    const cursor1 = part1.at(-1)!.cursor;
    // More rollouts finish while the consumer is away, some before its position.
    for (const i of [4, 10]) await finish(store, rs[i]!);
    const part2 = await read({ cursor: cursor1 }, (got) => ids(got).length === 4);
    seen.push(...ids(part2));
    const part3 = await read({ cursor: part2.at(-1)!.cursor });
    seen.push(...ids(part3));
    const finished = [...order, 4, 10].sort((a, b) => a - b).map((i) => rs[i]!.rolloutId);
    expect(seen.slice().sort()).toEqual(finished.slice().sort());
    expect(new Set(seen).size).toBe(seen.length);

    // Following from the caught-up cursor: the last two arrive as they finish, exactly once.
    const following = read({ cursor: part3.at(-1)!.cursor, follow: true }, (got) => ids(got).length === 2);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await finish(store, rs[8]!, AttemptStatus.FAILED);
    await finish(store, rs[6]!);
    expect(ids(await following).sort()).toEqual([rs[6]!.rolloutId, rs[8]!.rolloutId].sort());
  });

  it("filters by group, ids, rollout mode, status and resources; rejects bad and foreign cursors", async () => {
    const a = await claimWithSpans(store, 3, { groupId: "g-a", mode: RolloutMode.TRAIN });
    const b = await claimWithSpans(store, 2, { groupId: "g-b", mode: RolloutMode.VAL });
    for (const r of [...a, ...b]) await finish(store, r);
    await finish(store, a[2]!, AttemptStatus.FAILED); // already finished: sticky, stays succeeded
    expect(ids(await read({ groupId: "g-b" }))).toEqual(b.map((r) => r.rolloutId));
    expect(ids(await read({ rolloutIds: [b[1]!.rolloutId, a[0]!.rolloutId] }))).toEqual([a[0]!.rolloutId, b[1]!.rolloutId]);
    expect(ids(await read({ rolloutMode: RolloutMode.TRAIN }))).toEqual(a.map((r) => r.rolloutId));
    expect(ids(await read({ statusIn: [RolloutStatus.FAILED] }))).toEqual([]);
    const byResources = await read({ resourcesId: "rs-nothing" });
    expect(byResources.flatMap((m) => m.rollout?.triplets ?? [])).toEqual([]);

    const cursor = (await read({ groupId: "g-a" }, (got) => ids(got).length === 1)).at(-1)!.cursor;
    await expect(read({ groupId: "g-b", cursor })).rejects.toMatchObject({ code: Code.InvalidArgument });
    await expect(read({ cursor: "garbage!" })).rejects.toMatchObject({ code: Code.InvalidArgument });
    await expect(read({ statusIn: [RolloutStatus.RUNNING] })).rejects.toMatchObject({ code: Code.InvalidArgument });
    // Enum values outside their enums are refused, like every store enum, naming the field.
    for (const [request, field] of [
      [{ rolloutMode: 99 as RolloutMode }, "rollout_mode"],
      [{ options: { mode: 7 as TripletMode } }, "options.mode"],
      [{ options: { rewardMatch: 42 as RewardMatch } }, "options.reward_match"],
    ] as const) {
      await expect(read(request)).rejects.toMatchObject({ code: Code.InvalidArgument, rawMessage: expect.stringContaining(field) });
    }
  });

  it("following, reads again only the rollouts the store's events say finished, not every unfinished one each poll", async () => {
    const rs = await claimWithSpans(store, 30, { calls: 1 });
    const got: string[] = [];
    const abort = new AbortController();
    const following = (async () => {
      for await (const m of client.streamTriplets({ follow: true }, { signal: abort.signal, timeoutMs: 20_000 })) {
        if (m.rollout) got.push(m.rollout.rolloutId);
      }
    })().catch((e) => expect(ConnectError.from(e).code).toBe(Code.Canceled));
    // Ten polls (50 ms) with nothing finished: the first pass read the 30 rollouts, and nothing since.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(rolloutReads).toBe(30);
    for (const i of [4, 1, 20]) await finish(store, rs[i]!);
    // Rollouts created while the stream follows, one of them finished: found by reading from where the last read ended.
    const [late] = await claimWithSpans(store, 2, { calls: 1 });
    await finish(store, late!);
    await expect.poll(() => got.length, { timeout: 5_000 }).toBe(4);
    expect(got.slice(0, 3).sort()).toEqual([1, 4, 20].map((i) => rs[i]!.rolloutId).sort());
    expect(got[3]).toBe(late!.rolloutId);
    expect(rolloutReads).toBeLessThanOrEqual(30 + 3 + 2);
    abort.abort();
    await following;
  });

  it("following, finds by its full passes a finish no event reported (another server's on a shared SQLite file)", async () => {
    const deaf = await startStoreServer({
      store,
      port: 0,
      triplets: { pollIntervalMs: 50, events: () => () => {}, fullPassMs: 200 },
    });
    const deafClient = createTripletClient({ baseUrl: deaf.url });
    try {
      const rs = await claimWithSpans(store, 3, { calls: 1 });
      const abort = new AbortController();
      const got: string[] = [];
      const following = (async () => {
        for await (const m of deafClient.streamTriplets({ follow: true }, { signal: abort.signal, timeoutMs: 5_000 })) {
          if (m.rollout) got.push(m.rollout.rolloutId);
          if (got.length === 2) abort.abort();
        }
      })().catch((e) => expect(ConnectError.from(e).code).toBe(Code.Canceled));
      await new Promise((resolve) => setTimeout(resolve, 100));
      for (const i of [2, 0]) await finish(store, rs[i]!);
      await following;
      expect(got.sort()).toEqual([rs[0]!.rolloutId, rs[2]!.rolloutId].sort());
    } finally {
      deafClient.close();
      await deaf.close();
    }
  });

  it("builds messages only as fast as the consumer takes them (backpressure)", async () => {
    // ~60 KB per message. What may run ahead is bounded by the transports' buffers: grpc-js queues 16 messages on
    // each side, plus one HTTP/2 flow-control window; and in the store's process the spans are read 32 rollouts at a
    // time, so up to one such batch more.
    const rs = await claimWithSpans(store, 120, { calls: 1, promptLength: 20_000 });
    for (const r of rs) await finish(store, r);
    const abort = new AbortController();
    const stream = client.streamTriplets({}, { signal: abort.signal })[Symbol.asyncIterator]();
    await stream.next();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const builtWhileIdle = spanReads;
    expect(builtWhileIdle).toBeLessThanOrEqual(40 + 32);
    let count = 1;
    for (let next = await stream.next(); !next.done && next.value.rollout; next = await stream.next()) count++;
    expect(count).toBe(120);
    expect(spanReads).toBe(120);
    abort.abort();
  });
});

describe("TripletService unary calls", () => {
  it("builds one rollout's triplets in trajectory mode and its messages, also over Connect JSON", async () => {
    const [r] = await claimWithSpans(store, 1, { calls: 2 });
    const one = await client.getRolloutTriplets({ rolloutId: r!.rolloutId, options: { mode: TripletMode.TRAJECTORY } });
    expect(one.triplets).toHaveLength(2); // the second prompt does not continue the first
    expect(one.stats?.mismatches).toEqual({ prompt_changed: 1 });
    const res = await fetch(`${server.url}/agl.v1.TripletService/GetRolloutMessages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rolloutIds: [r!.rolloutId] }),
    });
    const body = await res.json();
    expect(body.rollouts[0]).toMatchObject({ rolloutId: r!.rolloutId, status: "ROLLOUT_STATUS_RUNNING" });
    expect(body.rollouts[0].conversations).toHaveLength(2);
    await expect(client.getRolloutTriplets({ rolloutId: "ro-000000000000" })).rejects.toMatchObject({ code: Code.NotFound });
    for (const options of [{ mode: 3 as TripletMode }, { rewardMatch: -1 as RewardMatch }]) {
      await expect(client.getRolloutTriplets({ rolloutId: r!.rolloutId, options })).rejects.toMatchObject({ code: Code.InvalidArgument });
    }
    // Over Connect JSON too, where an unknown number is what a client that is newer than the server would send.
    const bad = await fetch(`${server.url}/agl.v1.TripletService/GetRolloutTriplets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rolloutId: r!.rolloutId, options: { rewardMatch: 9 } }),
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).code).toBe("invalid_argument");
  });
});

describe("StreamTriplets in the process of a SQLite store", () => {
  it("while one follows, the backend keeps the spans it receives, and the triplets are built from them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-kept-"));
    const sqlite = createStore({
      backend: createSqliteBackend({ path: join(dir, "store.db"), keepSpansAfterReadersMs: 200 }),
      watchdogIntervalSeconds: 0,
    });
    const sqliteServer = await startStoreServer({ store: sqlite, port: 0, triplets: { pollIntervalMs: 50 } });
    const remote = createStoreClient({ baseUrl: sqliteServer.url });
    const triplets = createTripletClient({ baseUrl: sqliteServer.url });
    // Kept spans are handed out frozen; spans read from the file are decoded afresh.
    const kept = async (r: ClaimedRollout) => {
      const frozen = new Set((await sqlite.querySpans({ rolloutId: r.rolloutId })).spans.map((s) => Object.isFrozen(s)));
      return frozen.size === 1 ? [...frozen][0] : "some";
    };
    try {
      const [before] = await claimWithSpans(remote, 1, { calls: 2 });
      expect(await kept(before!)).toBe(false);
      const abort = new AbortController();
      const got: StreamTripletsResponse[] = [];
      const following = (async () => {
        for await (const m of triplets.streamTriplets({ follow: true }, { signal: abort.signal, timeoutMs: 20_000 })) got.push(m);
      })().catch((e) => expect(ConnectError.from(e).code).toBe(Code.Canceled));
      await expect.poll(() => got.some((m) => m.caughtUp), { timeout: 5_000 }).toBe(true);
      const [during] = await claimWithSpans(remote, 1, { calls: 2 });
      expect(await kept(during!)).toBe(true);
      await finish(remote, during!);
      await expect.poll(() => got.filter((m) => m.rollout).length, { timeout: 5_000 }).toBe(1);
      const sent = got.find((m) => m.rollout)?.rollout;
      expect(sent?.rolloutId).toBe(during!.rolloutId);
      expect(sent?.triplets.map((t) => t.promptTokenIds)).toEqual(during!.prompts);
      abort.abort();
      await following;
      // The stream ended: what was kept is dropped (after `keepSpansAfterReadersMs`), and nothing new is kept.
      await expect.poll(() => kept(during!), { timeout: 5_000 }).toBe(false);
      const [after] = await claimWithSpans(remote, 1, { calls: 1 });
      expect(await kept(after!)).toBe(false);
    } finally {
      triplets.close();
      remote.close();
      await sqliteServer.close();
      await sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
