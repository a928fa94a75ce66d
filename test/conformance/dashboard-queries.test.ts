/**
 * What the dashboard reads: QueryRollouts' scope filters (mode, resources id and version, creation and end time),
 * final rewards of a page, GetRolloutTimeline and GetRewardsByResources, with their validation.
 */
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AGL_LLM_PROMPT_TOKEN_IDS, AGL_LLM_RESPONSE_TOKEN_IDS, GEN_AI_RESPONSE_ID, rewardValueKey } from "../../src/core/semconv.js";
import { AttemptStatus, AttributeValueSchema, FilterLogic, RolloutMode, RolloutStatus, SortOrder } from "../../src/gen/agl/v1/types_pb.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { enqueueN, expectCode, expectRejectedUnchanged, ids, json, makeSpan, openStore, startRollout, unjson } from "./harness.js";

/** A span reporting `value` as the primary reward. */
function rewardSpan(rolloutId: string, attemptId: string, value: number) {
  const span = makeSpan(rolloutId, attemptId, { name: "agentlightning.reward" });
  span.attributes[rewardValueKey(0)] = create(AttributeValueSchema, { value: { case: "doubleValue", value } });
  return span;
}

/** An LLM call span recorded with `prompt` prompt token ids and `response` response token ids, and its response id. */
function llmSpan(rolloutId: string, attemptId: string, prompt: number, response: number, responseId?: string) {
  const span = makeSpan(rolloutId, attemptId, { name: "openai.chat.completion" });
  const tokenIds = (n: number) =>
    create(AttributeValueSchema, { value: { case: "intArray", value: { values: Array.from({ length: n }, (_, i) => BigInt(i)) } } });
  span.attributes[AGL_LLM_PROMPT_TOKEN_IDS] = tokenIds(prompt);
  span.attributes[AGL_LLM_RESPONSE_TOKEN_IDS] = tokenIds(response);
  if (responseId !== undefined)
    span.attributes[GEN_AI_RESPONSE_ID] = create(AttributeValueSchema, { value: { case: "stringValue", value: responseId } });
  return span;
}

async function publish(store: Store, resourcesId?: string) {
  const resources = { p: { kind: { case: "json" as const, value: json(1) } } };
  return resourcesId ? store.updateResources({ resourcesId, resources, createIfMissing: true }) : store.addResources({ resources });
}

/** Starts a rollout, stores `spans` on its attempt, and finishes the attempt with `status`. */
async function finished(
  store: Store,
  extra: { mode?: RolloutMode; resourcesId?: string },
  status: AttemptStatus,
  rewards: number[],
  calls: Array<[prompt: number, response: number, responseId?: string]> = [],
) {
  const { rolloutId, attemptId } = await startRollout(store, extra);
  const spans = [
    ...calls.map(([p, r, id]) => llmSpan(rolloutId, attemptId, p, r, id)),
    ...rewards.map((v) => rewardSpan(rolloutId, attemptId, v)),
  ];
  await store.updateAttempt({ rolloutId, attemptId, status, spans });
  return rolloutId;
}

describe.each(backends)("dashboard queries [$name]", (def) => {
  describe("rollouts' resources version", () => {
    it("records the version latest at creation, and follows a new resources id", async () => {
      const { store } = await openStore(def);
      const [none] = await enqueueN(store, 1);
      expect(none!.resourcesVersion).toBe(0);
      const first = await publish(store, "policy");
      const [atV1] = await enqueueN(store, 1);
      await publish(store, "policy");
      const [atV2] = await enqueueN(store, 1);
      expect([atV1!.resourcesId, atV1!.resourcesVersion]).toEqual([first.resourcesId, 1]);
      expect([atV2!.resourcesId, atV2!.resourcesVersion]).toEqual(["policy", 2]);
      const other = await publish(store);
      const [explicit] = await enqueueN(store, 1, { resourcesId: "policy" });
      expect(explicit!.resourcesVersion).toBe(2);
      const moved = await store.updateRollout({ rolloutId: atV1!.rolloutId, resourcesId: other.resourcesId });
      expect([moved.resourcesId, moved.resourcesVersion]).toEqual([other.resourcesId, 1]);
      expect((await store.getRollout({ rolloutId: atV2!.rolloutId })).resourcesVersion).toBe(2);
    });
  });

  describe("resources history", () => {
    it("keeps every version: QueryResourceVersions pages and sorts them, GetResources reads a past one", async () => {
      const { store } = await openStore(def);
      const resources = (n: number) => ({ p: { kind: { case: "json" as const, value: json(n) } } });
      const first = await store.addResources({ resources: resources(1) });
      const id = first.resourcesId;
      await store.updateResources({ resourcesId: id, resources: resources(2) });
      await store.addResources({ resources: resources(9) });
      await store.updateResources({ resourcesId: id, resources: resources(3) });
      const content = (u: { resources: Record<string, { kind: { value?: unknown } }> }) => unjson(u.resources.p?.kind.value as never);
      const all = await store.queryResourceVersions({ resourcesId: id });
      expect(all.resources.map((u) => [u.version, content(u)])).toEqual([
        [1, 1],
        [2, 2],
        [3, 3],
      ]);
      expect(all.page?.total).toBe(3);
      expect(all.resources[0]).toEqual(first);
      const desc = await store.queryResourceVersions({
        resourcesId: id,
        page: { sortBy: "version", sortOrder: SortOrder.DESC, limit: 1, offset: 1 },
      });
      expect([desc.resources.map((u) => u.version), desc.page?.total]).toEqual([[2], 3]);
      expect(content(await store.getResources({ resourcesId: id, version: 1 }))).toBe(1);
      expect((await store.getResources({ resourcesId: id })).version).toBe(3);
      expect((await store.getResources({ resourcesId: id, version: 3 })).version).toBe(3);
      await expectCode(store.getResources({ resourcesId: id, version: 4 }), Code.NotFound, "have no version 4 (versions 1 to 3)");
      await expectCode(store.queryResourceVersions({ resourcesId: "nope" }), Code.NotFound, '"nope" not found');
      await expectCode(store.queryResourceVersions({ resourcesId: "" }), Code.InvalidArgument, "resources_id is required");
      await expectCode(
        store.queryResourceVersions({ resourcesId: id, page: { sortBy: "update_time" } }),
        Code.InvalidArgument,
        'cannot sort resource_versions by "update_time"',
      );
    });
  });

  describe("QueryRollouts scope", () => {
    it("filters by mode, resources id and version, and sorts by version", async () => {
      const { store } = await openStore(def);
      await publish(store, "policy");
      const [t1] = await enqueueN(store, 1, { mode: RolloutMode.TRAIN });
      await publish(store, "policy");
      const [v2] = await enqueueN(store, 1, { mode: RolloutMode.VAL });
      const [t2] = await enqueueN(store, 1, { mode: RolloutMode.TRAIN });
      const other = await publish(store);
      const [o] = await enqueueN(store, 1, { mode: RolloutMode.TEST });
      const q = async (req: Parameters<Store["queryRollouts"]>[0]) => ids((await store.queryRollouts(req)).rollouts);
      expect(await q({ modeIn: [RolloutMode.TRAIN] })).toEqual([t1!.rolloutId, t2!.rolloutId]);
      expect(await q({ modeIn: [RolloutMode.VAL, RolloutMode.TEST] })).toEqual([v2!.rolloutId, o!.rolloutId]);
      expect(await q({ modeIn: [RolloutMode.UNSPECIFIED] })).toEqual([]);
      expect(await q({ resourcesIdIn: ["policy"] })).toEqual([t1!.rolloutId, v2!.rolloutId, t2!.rolloutId]);
      expect(await q({ resourcesIdIn: [other.resourcesId, "nope"] })).toEqual([o!.rolloutId]);
      expect(await q({ resourcesIdIn: ["policy"], resourcesVersion: 2 })).toEqual([v2!.rolloutId, t2!.rolloutId]);
      expect(await q({ resourcesIdIn: ["policy"], resourcesVersion: 2, modeIn: [RolloutMode.TRAIN] })).toEqual([t2!.rolloutId]);
      const byVersion = await q({ page: { sortBy: "resources_version", sortOrder: SortOrder.DESC } });
      // Ties keep insertion order: v2 and t2 (version 2) before t1 and o (version 1).
      expect(byVersion).toEqual([v2!.rolloutId, t2!.rolloutId, t1!.rolloutId, o!.rolloutId]);
    });

    it("filters by creation and end time as [from, to), unfinished rollouts outside any end range", async () => {
      const { store, clock } = await openStore(def);
      const t0 = clock.t;
      const [a] = await enqueueN(store, 1);
      clock.advance(10);
      const b = await finished(store, {}, AttemptStatus.SUCCEEDED, []);
      clock.advance(10);
      const c = await finished(store, {}, AttemptStatus.FAILED, []);
      const q = async (req: Parameters<Store["queryRollouts"]>[0]) => ids((await store.queryRollouts(req)).rollouts);
      expect(await q({ startTimeFrom: t0 + 10 })).toEqual([b, c]);
      expect(await q({ startTimeTo: t0 + 10 })).toEqual([a!.rolloutId]);
      expect(await q({ startTimeFrom: t0, startTimeTo: t0 + 20 })).toEqual([a!.rolloutId, b]);
      expect(await q({ endTimeFrom: 0 })).toEqual([b, c]);
      expect(await q({ endTimeTo: t0 + 20 })).toEqual([b]);
      expect(await q({ endTimeFrom: t0 + 20, endTimeTo: t0 + 21 })).toEqual([c]);
    });

    it("always restricts, under OR logic too, and pages with the scoped total", async () => {
      const { store } = await openStore(def);
      const train = await enqueueN(store, 5, { mode: RolloutMode.TRAIN });
      const [val] = await enqueueN(store, 1, { mode: RolloutMode.VAL });
      const or = await store.queryRollouts({
        statusIn: [RolloutStatus.QUEUING],
        groupId: "none",
        filterLogic: FilterLogic.OR,
        modeIn: [RolloutMode.VAL],
      });
      expect(ids(or.rollouts)).toEqual([val!.rolloutId]);
      const page = await store.queryRollouts({
        modeIn: [RolloutMode.TRAIN],
        page: { sortBy: "start_time", sortOrder: SortOrder.DESC, limit: 2, offset: 2 },
      });
      // Equal start times keep insertion order.
      expect(ids(page.rollouts)).toEqual(ids(train.slice(2, 4)));
      expect(page.page?.total).toBe(5);
    });

    it("returns the final reward of each rollout of the page when asked: the latest attempt's last reward span", async () => {
      const { store } = await openStore(def);
      const rewarded = await finished(store, {}, AttemptStatus.SUCCEEDED, [0.25, 0.75]);
      const unrewarded = await finished(store, {}, AttemptStatus.SUCCEEDED, []);
      const { rolloutId: retried, attemptId: first } = await startRollout(store);
      await store.addSpans({ spans: [rewardSpan(retried, first, 0.9)] });
      const second = (await store.startAttempt({ rolloutId: retried })).latestAttempt!.attemptId;
      await store.addSpans({ spans: [rewardSpan(retried, second, 0.125)] });
      const { rolloutId: rewardOnlyEarlier, attemptId: early } = await startRollout(store);
      await store.addSpans({ spans: [rewardSpan(rewardOnlyEarlier, early, 1)] });
      await store.startAttempt({ rolloutId: rewardOnlyEarlier });

      const res = await store.queryRollouts({ includeFinalRewards: true });
      expect(res.finalRewards).toEqual({ [rewarded]: 0.75, [retried]: 0.125 });
      expect(res.finalRewards[unrewarded]).toBeUndefined();
      const page = await store.queryRollouts({ includeFinalRewards: true, page: { limit: 1 } });
      expect(page.finalRewards).toEqual({ [rewarded]: 0.75 });
      expect((await store.queryRollouts({})).finalRewards).toEqual({});
    });

    it("rejects bad scopes with INVALID_ARGUMENT, changing nothing", async () => {
      const { store } = await openStore(def);
      await enqueueN(store, 1);
      await expectRejectedUnchanged(
        store,
        () => store.queryRollouts({ startTimeFrom: 10, startTimeTo: 10 }),
        Code.InvalidArgument,
        "start_time_to (10) must be greater than start_time_from (10)",
      );
      await expectRejectedUnchanged(
        store,
        () => store.queryRollouts({ endTimeFrom: 5, endTimeTo: 1 }),
        Code.InvalidArgument,
        "end_time_to",
      );
      await expectCode(store.queryRollouts({ startTimeFrom: Number.NaN }), Code.InvalidArgument, "start_time_from must be a finite number");
      await expectCode(store.queryRollouts({ modeIn: [9 as RolloutMode] }), Code.InvalidArgument, "mode_in: invalid value 9");
      await expectCode(store.queryRollouts({ resourcesIdIn: [""] }), Code.InvalidArgument, "resources_id_in is required");
      await expectCode(
        store.queryRollouts({ page: { sortBy: "reward" } }),
        Code.InvalidArgument,
        'cannot sort rollouts by "reward"',
        "resources_version",
      );
      await expectCode(
        store.queryRollouts({ page: { limit: 100_001 } }),
        Code.InvalidArgument,
        "page.limit must be -1 (all) or between 0 and 100000",
      );
    });
  });

  describe("GetRolloutTimeline", () => {
    it("counts created and finished rollouts per bucket, mode and status", async () => {
      const { store, clock } = await openStore(def);
      const t0 = clock.t;
      await enqueueN(store, 2, { mode: RolloutMode.TRAIN });
      clock.advance(30);
      await finished(store, { mode: RolloutMode.VAL }, AttemptStatus.SUCCEEDED, []);
      clock.advance(45);
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.FAILED, []);
      const res = await store.getRolloutTimeline({ startTime: t0, endTime: t0 + 120, bucketSeconds: 60 });
      expect([res.startTime, res.endTime, res.bucketSeconds, res.bucketCount]).toEqual([t0, t0 + 120, 60, 2]);
      const plain = (rows: typeof res.created) => rows.map((r) => [r.bucket, r.mode, r.status, r.count]);
      expect(plain(res.created)).toEqual([
        [0, RolloutMode.TRAIN, RolloutStatus.QUEUING, 2],
        [0, RolloutMode.VAL, RolloutStatus.SUCCEEDED, 1],
        [1, RolloutMode.TRAIN, RolloutStatus.FAILED, 1],
      ]);
      expect(plain(res.finished)).toEqual([
        [0, RolloutMode.VAL, RolloutStatus.SUCCEEDED, 1],
        [1, RolloutMode.TRAIN, RolloutStatus.FAILED, 1],
      ]);
      const val = await store.getRolloutTimeline({ startTime: t0, endTime: t0 + 120, bucketSeconds: 60, modeIn: [RolloutMode.VAL] });
      expect(plain(val.created)).toEqual([[0, RolloutMode.VAL, RolloutStatus.SUCCEEDED, 1]]);
      const late = await store.getRolloutTimeline({ startTime: t0 + 60, endTime: t0 + 75, bucketSeconds: 5 });
      expect(late.bucketCount).toBe(3);
      expect(plain(late.created)).toEqual([]);
      expect(plain((await store.getRolloutTimeline({ startTime: t0 + 60, endTime: t0 + 76, bucketSeconds: 5 })).created)).toEqual([
        [3, RolloutMode.TRAIN, RolloutStatus.FAILED, 1],
      ]);
    });

    it("defaults to one bucket from the first rollout up to and including now", async () => {
      const { store, clock } = await openStore(def);
      const empty = await store.getRolloutTimeline({});
      expect([empty.bucketCount, empty.created, empty.finished]).toEqual([1, [], []]);
      const t0 = clock.t;
      await enqueueN(store, 3, { mode: RolloutMode.TRAIN });
      clock.advance(100);
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.SUCCEEDED, []);
      const res = await store.getRolloutTimeline({});
      expect(res.startTime).toBe(t0);
      expect(res.endTime).toBeGreaterThan(clock.t);
      expect(res.bucketCount).toBe(1);
      expect(res.created.map((r) => [r.bucket, r.status, r.count])).toEqual([
        [0, RolloutStatus.QUEUING, 3],
        [0, RolloutStatus.SUCCEEDED, 1],
      ]);
      expect(res.finished.map((r) => [r.bucket, r.status, r.count])).toEqual([[0, RolloutStatus.SUCCEEDED, 1]]);
      const buckets = await store.getRolloutTimeline({ bucketSeconds: 10 });
      expect(buckets.bucketCount).toBe(11);
      expect(buckets.created.map((r) => [r.bucket, r.count])).toEqual([
        [0, 3],
        [10, 1],
      ]);
    });

    it("rejects bad windows with INVALID_ARGUMENT and an actionable message", async () => {
      const { store, clock } = await openStore(def);
      await expectCode(
        store.getRolloutTimeline({ startTime: 10, endTime: 10 }),
        Code.InvalidArgument,
        "end_time (10) must be greater than start_time (10)",
      );
      await expectCode(store.getRolloutTimeline({ bucketSeconds: -1 }), Code.InvalidArgument, "bucket_seconds");
      await expectCode(store.getRolloutTimeline({ bucketSeconds: Number.POSITIVE_INFINITY }), Code.InvalidArgument, "bucket_seconds");
      await expectCode(store.getRolloutTimeline({ startTime: Number.NaN }), Code.InvalidArgument, "start_time must be a finite number");
      await expectCode(
        store.getRolloutTimeline({ startTime: 0, endTime: 100_000, bucketSeconds: 1 }),
        Code.InvalidArgument,
        "100000 buckets, more than 10000: widen bucket_seconds",
      );
      await expectCode(store.getRolloutTimeline({ startTime: clock.t + 60 }), Code.InvalidArgument, "is after now; give an end_time");
      // Finite ends whose distance is not (found by the gRPC fuzzer: one bucket of infinite width made NaN buckets).
      await expectCode(
        store.getRolloutTimeline({ startTime: -1e308, endTime: 1e308 }),
        Code.InvalidArgument,
        "is too wide to count in seconds",
      );
    });
  });

  describe("GetRewardsByResources", () => {
    it("gives count, mean, spread and range of final rewards per resources version and mode", async () => {
      const { store, clock } = await openStore(def);
      await publish(store, "policy");
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.SUCCEEDED, [0.5, 0.25]);
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.FAILED, [0.75]);
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.SUCCEEDED, []);
      await finished(store, { mode: RolloutMode.VAL }, AttemptStatus.SUCCEEDED, [1]);
      clock.advance(5);
      await publish(store, "policy");
      await finished(
        store,
        { mode: RolloutMode.TRAIN },
        AttemptStatus.SUCCEEDED,
        [1],
        [
          [10, 4],
          [12, 6],
        ],
      );
      await finished(store, { mode: RolloutMode.TRAIN }, AttemptStatus.SUCCEEDED, [0], [[20, 2]]);
      // Neither counts by default: cancelled, and not finished.
      const { rolloutId: cancelled } = await startRollout(store, { mode: RolloutMode.TRAIN });
      await store.updateRollout({ rolloutId: cancelled, status: RolloutStatus.CANCELLED });
      await startRollout(store, { mode: RolloutMode.TRAIN });

      const { stats } = await store.getRewardsByResources({});
      const rows = stats.map((s) => ({
        key: [s.resourcesId, s.resourcesVersion, s.mode],
        counts: [s.rollouts, s.rewarded, s.llmCalls, Number(s.promptTokens), Number(s.responseTokens)],
      }));
      expect(rows).toEqual([
        { key: ["policy", 1, RolloutMode.TRAIN], counts: [3, 2, 0, 0, 0] },
        { key: ["policy", 1, RolloutMode.VAL], counts: [1, 1, 0, 0, 0] },
        { key: ["policy", 2, RolloutMode.TRAIN], counts: [2, 2, 3, 42, 12] },
      ]);
      const [v1, val, v2] = stats;
      expect(v1!.mean).toBeCloseTo(0.5, 12);
      expect(v1!.std).toBeCloseTo(0.25, 12);
      expect([v1!.min, v1!.max]).toEqual([0.25, 0.75]);
      expect([val!.mean, val!.std, val!.min, val!.max]).toEqual([1, 0, 1, 1]);
      expect(v2!.mean).toBeCloseTo(0.5, 12);
      expect(v2!.std).toBeCloseTo(0.5, 12);
      expect(v1!.firstStartTime).toBeLessThan(v2!.firstStartTime);
      expect(v2!.lastStartTime).toBe(clock.t);

      const cancelledOnly = await store.getRewardsByResources({ statusIn: [RolloutStatus.CANCELLED] });
      expect(cancelledOnly.stats.map((s) => [s.resourcesVersion, s.rollouts, s.rewarded, s.mean])).toEqual([[2, 1, 0, undefined]]);
      const valOnly = await store.getRewardsByResources({ modeIn: [RolloutMode.VAL], resourcesIdIn: ["policy"] });
      expect(valOnly.stats.map((s) => s.mode)).toEqual([RolloutMode.VAL]);
      const later = await store.getRewardsByResources({ startTimeFrom: clock.t });
      expect(later.stats.map((s) => [s.resourcesVersion, s.rollouts])).toEqual([[2, 2]]);
      expect((await store.getRewardsByResources({ resourcesIdIn: ["other"] })).stats).toEqual([]);
    });

    it("counts an LLM call once however many spans of its rollout record it (the same response id)", async () => {
      const { store } = await openStore(def);
      await publish(store, "policy");
      // The proxy's record, the client's and a framework's span enriched from it: one call. Another call, and two
      // records without a response id, which nothing ties together: two calls.
      const once: Array<[number, number, string?]> = [
        [10, 4, "chatcmpl-1"],
        [10, 4, "chatcmpl-1"],
        [10, 4, "chatcmpl-1"],
      ];
      await finished(store, {}, AttemptStatus.SUCCEEDED, [1], [...once, [8, 3, "chatcmpl-2"], [5, 2], [5, 2]]);
      // A response id is one call within a rollout only.
      await finished(store, {}, AttemptStatus.SUCCEEDED, [0], [[7, 1, "chatcmpl-1"]]);
      const { stats } = await store.getRewardsByResources({});
      expect(stats.map((s) => [s.rollouts, s.llmCalls, Number(s.promptTokens), Number(s.responseTokens)])).toEqual([[2, 5, 35, 12]]);
    });

    it("rejects bad filters with INVALID_ARGUMENT", async () => {
      const { store } = await openStore(def);
      await expectCode(
        store.getRewardsByResources({ statusIn: [RolloutStatus.UNSPECIFIED] }),
        Code.InvalidArgument,
        "status_in: invalid value 0",
      );
      await expectCode(
        store.getRewardsByResources({ startTimeFrom: 2, startTimeTo: 1 }),
        Code.InvalidArgument,
        "start_time_to (1) must be greater",
      );
      await expectCode(
        store.getRewardsByResources({ resourcesIdIn: ["x".repeat(300)] }),
        Code.InvalidArgument,
        "resources_id_in is longer than",
      );
    });
  });
});
