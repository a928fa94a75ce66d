/**
 * Bad input: unknown ids (NOT_FOUND naming the id), invalid enum numbers, invalid configs and limits
 * (INVALID_ARGUMENT). After every rejected call the stored data is unchanged.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { addSpan, enqueueN, expectRejectedUnchanged, json, makeSpan, openStore, spec, type SpecExtra, startRollout } from "./harness.js";

/** An out-of-range enum number, typed to fit any enum field. */
const badEnum = (n: number) => n as never;

/** Incompressible text well past what one PostgreSQL index entry holds (about 2.7 kB). */
const unindexable = Array.from({ length: 3_000 }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7_919) % 20_000))).join("");

const RO = "ro-0badc0ffee00";
const AT = "at-0badc0de";

/** Some state to protect: a started rollout with a span, a queued one, a worker and a resources snapshot. */
async function seed(store: Store) {
  const started = await startRollout(store, {}, "w");
  await addSpan(store, started.rolloutId, started.attemptId);
  const [queued] = await enqueueN(store, 1);
  await store.updateWorker({ workerId: "w2", heartbeatStats: { a: 1 } });
  const res = await store.addResources({ resources: {} });
  return { ...started, queuedId: queued!.rolloutId, resourcesId: res.resourcesId };
}

describe.each(backends)("bad input [$name]", (def) => {
  describe("unknown ids are NOT_FOUND naming the id", () => {
    const cases: Array<[string, (s: Store, ctx: Awaited<ReturnType<typeof seed>>) => Promise<unknown>, string]> = [
      ["GetRollout", (s) => s.getRollout({ rolloutId: RO }), RO],
      ["UpdateRollout", (s) => s.updateRollout({ rolloutId: RO, status: RolloutStatus.SUCCEEDED }), RO],
      ["StartAttempt", (s) => s.startAttempt({ rolloutId: RO, workerId: "w9" }), RO],
      ["QueryAttempts", (s) => s.queryAttempts({ rolloutId: RO }), RO],
      ["GetLatestAttempt", (s) => s.getLatestAttempt({ rolloutId: RO }), RO],
      [
        "UpdateAttempt of an unknown rollout",
        (s) => s.updateAttempt({ rolloutId: RO, attemptId: "latest", status: AttemptStatus.FAILED }),
        RO,
      ],
      [
        "UpdateAttempt of an unknown attempt",
        (s, c) => s.updateAttempt({ rolloutId: c.rolloutId, attemptId: AT, status: AttemptStatus.FAILED }),
        AT,
      ],
      [
        "UpdateAttempt of a rollout without attempts",
        (s, c) => s.updateAttempt({ rolloutId: c.queuedId, attemptId: "latest", status: AttemptStatus.FAILED }),
        "",
      ],
      ["WaitForRollouts", (s) => s.waitForRollouts({ rolloutIds: [RO], timeoutSeconds: 0 }), RO],
      ["QuerySpans of an unknown rollout", (s) => s.querySpans({ rolloutId: RO }), RO],
      ["QuerySpans of an unknown attempt", (s, c) => s.querySpans({ rolloutId: c.rolloutId, attemptId: AT }), AT],
      ["AddSpans of an unknown rollout", (s, c) => s.addSpans({ spans: [makeSpan(RO, c.attemptId)] }), RO],
      ["AddSpans of an unknown attempt", (s, c) => s.addSpans({ spans: [makeSpan(c.rolloutId, AT)] }), AT],
      ["NextSpanSequenceIds", (s) => s.nextSpanSequenceIds({ requests: [{ rolloutId: RO, attemptId: AT }] }), RO],
      ["GetWorker", (s) => s.getWorker({ workerId: "no-such-worker" }), "no-such-worker"],
      ["GetResources", (s) => s.getResources({ resourcesId: "rs-000000000000" }), "rs-000000000000"],
      ["UpdateResources", (s) => s.updateResources({ resourcesId: "rs-000000000000", resources: {} }), "rs-000000000000"],
      [
        "EnqueueRollouts resources_id",
        (s) => s.enqueueRollouts({ rollouts: [spec({}, { resourcesId: "rs-000000000000" })] }),
        "rs-000000000000",
      ],
      ["StartRollout resources_id", (s) => s.startRollout({ rollout: spec({}, { resourcesId: "rs-000000000000" }) }), "rs-000000000000"],
    ];
    it.each(cases)("%s", async (_name, call, id) => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      await expectRejectedUnchanged(store, () => call(store, ctx), Code.NotFound, id || ctx.queuedId);
    });
  });

  describe("invalid enum numbers are INVALID_ARGUMENT", () => {
    const cases: Array<[string, (s: Store, ctx: Awaited<ReturnType<typeof seed>>) => Promise<unknown>]> = [
      ["UpdateRollout status 99", (s, c) => s.updateRollout({ rolloutId: c.rolloutId, status: badEnum(99) })],
      ["UpdateRollout status unspecified", (s, c) => s.updateRollout({ rolloutId: c.rolloutId, status: badEnum(0) })],
      ["UpdateRollout mode 99", (s, c) => s.updateRollout({ rolloutId: c.rolloutId, mode: badEnum(99) })],
      ["UpdateAttempt status 99", (s, c) => s.updateAttempt({ rolloutId: c.rolloutId, attemptId: c.attemptId, status: badEnum(99) })],
      [
        "UpdateAttempt status unspecified",
        (s, c) => s.updateAttempt({ rolloutId: c.rolloutId, attemptId: c.attemptId, status: badEnum(0) }),
      ],
      ["EnqueueRollouts mode 99", (s) => s.enqueueRollouts({ rollouts: [spec(), { mode: badEnum(99) }] })],
      ["StartRollout mode -1", (s) => s.startRollout({ rollout: { mode: badEnum(-1) } })],
      [
        "EnqueueRollouts retry_condition 99",
        (s) => s.enqueueRollouts({ rollouts: [spec({}, { config: { retryCondition: [badEnum(99)] } })] }),
      ],
      ["QueryRollouts status_in 99", (s) => s.queryRollouts({ statusIn: [RolloutStatus.QUEUING, badEnum(99)] })],
      ["QueryRollouts filter_logic 5", (s) => s.queryRollouts({ filterLogic: badEnum(5) })],
      ["QueryWorkers status_in 42", (s) => s.queryWorkers({ statusIn: [badEnum(42)] })],
      ["QuerySpans filter_logic 3", (s, c) => s.querySpans({ rolloutId: c.rolloutId, filterLogic: badEnum(3) })],
      ["QueryRollouts sort_order 7", (s) => s.queryRollouts({ page: { sortOrder: badEnum(7) } })],
    ];
    it.each(cases)("%s", async (_name, call) => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      await expectRejectedUnchanged(store, () => call(store, ctx), Code.InvalidArgument);
    });
  });

  describe("invalid configs are INVALID_ARGUMENT", () => {
    const configs: Array<[string, SpecExtra["config"]]> = [
      ["negative timeout_seconds", { timeoutSeconds: -1 }],
      ["negative unresponsive_seconds", { unresponsiveSeconds: -5 }],
      ["infinite timeout_seconds", { timeoutSeconds: Number.POSITIVE_INFINITY }],
      ["max_attempts over the limit", { maxAttempts: 1_000_000 }],
      ["a retry_condition that is not a failure", { retryCondition: [AttemptStatus.SUCCEEDED] }],
    ];
    it.each(configs)("%s on enqueue, start and update", async (_name, config) => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      await expectRejectedUnchanged(store, () => store.enqueueRollouts({ rollouts: [spec(), spec({}, { config })] }), Code.InvalidArgument);
      await expectRejectedUnchanged(store, () => store.startRollout({ rollout: spec({}, { config }) }), Code.InvalidArgument);
      await expectRejectedUnchanged(
        store,
        () => store.updateRollout({ rolloutId: ctx.rolloutId, config, metadata: { changed: true } }),
        Code.InvalidArgument,
      );
    });

    it("max_attempts at the limit is accepted", async () => {
      const { store } = await openStore(def);
      const [r] = await enqueueN(store, 1, { config: { maxAttempts: 1000 } });
      expect(r!.config?.maxAttempts).toBe(1000);
    });
  });

  describe("pagination limits", () => {
    const queries: Array<[string, (s: Store, ctx: Awaited<ReturnType<typeof seed>>, limit: number) => Promise<unknown>]> = [
      ["QueryRollouts", (s, _c, limit) => s.queryRollouts({ page: { limit } })],
      ["QueryAttempts", (s, c, limit) => s.queryAttempts({ rolloutId: c.rolloutId, page: { limit } })],
      ["QuerySpans", (s, c, limit) => s.querySpans({ rolloutId: c.rolloutId, page: { limit } })],
      ["QueryWorkers", (s, _c, limit) => s.queryWorkers({ page: { limit } })],
      ["QueryResources", (s, _c, limit) => s.queryResources({ page: { limit } })],
    ];
    it.each(queries)("%s: limits below -1 and above the maximum are INVALID_ARGUMENT", async (_name, q) => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      for (const limit of [-2, -100, 100_001]) {
        await expectRejectedUnchanged(store, () => q(store, ctx, limit), Code.InvalidArgument, "limit");
      }
      await q(store, ctx, 100_000);
      await q(store, ctx, -1);
    });
  });

  describe("request limits", () => {
    it("too many rollouts in one enqueue store none", async () => {
      const { store } = await openStore(def);
      await seed(store);
      const many = Array.from({ length: 10_001 }, () => ({}));
      await expectRejectedUnchanged(store, () => store.enqueueRollouts({ rollouts: many }), Code.InvalidArgument);
    });

    it("too many spans in one batch store none", async () => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      const many = Array.from({ length: 10_001 }, () => makeSpan(ctx.rolloutId, ctx.attemptId));
      await expectRejectedUnchanged(store, () => store.addSpans({ spans: many }), Code.InvalidArgument);
    });

    it("a group id longer than an id may be is INVALID_ARGUMENT (PostgreSQL could not index it)", async () => {
      const { store } = await openStore(def);
      await seed(store);
      const groupId = unindexable;
      const enqueue = () => store.enqueueRollouts({ rollouts: [spec({}, { groupId })] });
      await expectRejectedUnchanged(store, enqueue, Code.InvalidArgument, "group_id");
      await expectRejectedUnchanged(store, () => store.startRollout({ rollout: spec({}, { groupId }) }), Code.InvalidArgument, "group_id");
      const [kept] = (await store.enqueueRollouts({ rollouts: [spec({}, { groupId: "g".repeat(256) })] })).rollouts;
      expect(kept?.groupId).toBe("g".repeat(256));
    });

    it("StartAttempt's worker id is bounded like every other id", async () => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      const start = (workerId: string) => store.startAttempt({ rolloutId: ctx.rolloutId, workerId });
      await expectRejectedUnchanged(store, () => start(unindexable), Code.InvalidArgument, "worker_id");
      await expectRejectedUnchanged(store, () => start("w".repeat(257)), Code.InvalidArgument, "worker_id");
    });

    it("a dequeue limit over the maximum claims nothing", async () => {
      const { store } = await openStore(def);
      await seed(store);
      await expectRejectedUnchanged(store, () => store.dequeueRollouts({ limit: 1001 }), Code.InvalidArgument);
    });

    it("waits over the maximum are INVALID_ARGUMENT", async () => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      await expectRejectedUnchanged(store, () => store.dequeueRollouts({ waitSeconds: 3601 }), Code.InvalidArgument);
      await expectRejectedUnchanged(
        store,
        () => store.waitForRollouts({ rolloutIds: [ctx.rolloutId], timeoutSeconds: 3601 }),
        Code.InvalidArgument,
      );
      await expectRejectedUnchanged(
        store,
        () => store.waitForRollouts({ rolloutIds: [ctx.rolloutId], timeoutSeconds: Number.NaN }),
        Code.InvalidArgument,
      );
    });
  });

  describe("JSON values that JSON cannot carry are INVALID_ARGUMENT (found by fuzzing)", () => {
    // Stored, they could never be read back as JSON: a google.protobuf.Value without a kind, NaN and ±Infinity.
    const kindless = create(ValueSchema, {});
    const nan = create(ValueSchema, { kind: { case: "numberValue", value: Number.NaN } });
    const nested = create(ValueSchema, {
      kind: {
        case: "listValue",
        value: { values: [json(1), create(ValueSchema, { kind: { case: "structValue", value: { fields: { x: kindless } } } })] },
      },
    });
    let deep = json(1);
    for (let i = 0; i < 40; i++) deep = create(ValueSchema, { kind: { case: "listValue", value: { values: [deep] } } });
    let deepObject: JsonObject = {};
    for (let i = 0; i < 40; i++) deepObject = { a: deepObject };
    const cases: Array<[string, (s: Store, ctx: Awaited<ReturnType<typeof seed>>) => Promise<unknown>, RegExp]> = [
      [
        "an input without a kind",
        (s) => s.enqueueRollouts({ rollouts: [spec(), { input: kindless }] }),
        /input: a google.protobuf.Value needs/,
      ],
      ["a NaN input", (s) => s.startRollout({ rollout: { input: nan } }), /input: NaN is not a JSON number/],
      [
        "a kindless value deep in an input",
        (s, c) => s.updateRollout({ rolloutId: c.rolloutId, input: nested }),
        /input\[1\]\.x: a google.protobuf.Value needs/,
      ],
      ["an input nested 40 deep", (s) => s.enqueueRollouts({ rollouts: [{ input: deep }] }), /input: nested deeper than 32 levels/],
      ["metadata nested 40 deep", (s) => s.startRollout({ rollout: { metadata: deepObject } }), /metadata: nested deeper than 32 levels/],
      [
        "Infinity in rollout metadata",
        (s) => s.enqueueRollouts({ rollouts: [spec({}, { metadata: { a: { b: [Infinity] } } })] }),
        /metadata\.a\.b\[0\]: Infinity/,
      ],
      [
        "NaN in attempt metadata",
        (s, c) => s.updateAttempt({ rolloutId: c.rolloutId, attemptId: c.attemptId, metadata: { score: Number.NaN } }),
        /metadata\.score: NaN/,
      ],
      [
        "NaN in heartbeat stats",
        (s) => s.updateWorker({ workerId: "w2", heartbeatStats: { load: Number.NaN } }),
        /heartbeat_stats\.load: NaN/,
      ],
      [
        "a json resource without a kind",
        (s) => s.addResources({ resources: { r: { kind: { case: "json", value: kindless } } } }),
        /resources\["r"\]\.json: a google.protobuf.Value needs/,
      ],
      [
        "NaN in an LLM's sampling parameters",
        (s, c) =>
          s.updateResources({
            resourcesId: c.resourcesId,
            resources: { llm: { kind: { case: "llm", value: { endpoint: "http://x", samplingParameters: { temperature: Number.NaN } } } } },
          }),
        /sampling_parameters\.temperature: NaN/,
      ],
    ];
    it.each(cases)("%s", async (_name, call, message) => {
      const { store } = await openStore(def);
      const ctx = await seed(store);
      await expectRejectedUnchanged(store, () => call(store, ctx), Code.InvalidArgument, message);
    });
  });

  describe("missing ids are INVALID_ARGUMENT", () => {
    const cases: Array<[string, (s: Store) => Promise<unknown>]> = [
      ["GetRollout", (s) => s.getRollout({})],
      ["UpdateAttempt without attempt id", (s) => s.updateAttempt({ rolloutId: RO, status: AttemptStatus.FAILED })],
      ["UpdateWorker", (s) => s.updateWorker({ heartbeatStats: {} })],
      ["AddSpans without span id", (s) => s.addSpans({ spans: [{ rolloutId: RO, attemptId: AT }] })],
      ["UpdateResources", (s) => s.updateResources({ resources: {}, createIfMissing: true })],
    ];
    it.each(cases)("%s", async (_name, call) => {
      const { store } = await openStore(def);
      await seed(store);
      await expectRejectedUnchanged(store, () => call(store), Code.InvalidArgument);
    });
  });

  it("a rejected batch span leaves earlier spans and the attempt as they were", async () => {
    const { store, clock } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    clock.advance(10);
    const before = (await store.getLatestAttempt({ rolloutId })).attempt!;
    await expectRejectedUnchanged(
      store,
      () => store.addSpans({ spans: [makeSpan(rolloutId, attemptId), makeSpan(rolloutId, attemptId, { spanId: "" })] }),
      Code.InvalidArgument,
    );
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.lastHeartbeatTime).toBe(before.lastHeartbeatTime);
  });
});
