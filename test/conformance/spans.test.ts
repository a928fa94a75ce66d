/**
 * Spans: sequence ids per rollout, explicit ids, idempotency and acks, batch validation, queries by attempt and
 * filters (reference §2.5, §10.1 "Spans and sequence ids").
 */
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AttemptStatus, FilterLogic, RolloutStatus, SortOrder, SpanSchema, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import type { Store } from "../../src/store/store.js";
import { backends } from "./backends.js";
import { addSpan, expectRejectedUnchanged, makeSpan, openStore, sleep, startRollout, TRACE_A, TRACE_B } from "./harness.js";

const next = async (store: Store, rolloutId: string, attemptId: string) =>
  (await store.nextSpanSequenceIds({ requests: [{ rolloutId, attemptId }] })).sequenceIds[0];

describe.each(backends)("spans [$name]", (def) => {
  it("AddSpans allocates sequence ids in order and acks each span", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const spans = [0, 1, 2].map(() => makeSpan(rolloutId, attemptId));
    const { acks } = await store.addSpans({ spans });
    expect(acks.map((a) => a.sequenceId)).toEqual([1, 2, 3]);
    expect(acks.map((a) => a.spanId)).toEqual(spans.map((s) => s.spanId));
    for (const a of acks) {
      expect(a.rolloutId).toBe(rolloutId);
      expect(a.attemptId).toBe(attemptId);
      expect(a.duplicate).toBe(false);
      expect(a.attemptStatus).toBe(AttemptStatus.RUNNING);
    }
    const stored = (await store.querySpans({ rolloutId })).spans;
    expect(stored.map((s) => [s.spanId, s.sequenceId])).toEqual(spans.map((s, i) => [s.spanId, i + 1]));
  });

  it("NextSpanSequenceIds and AddSpans share one counter per rollout, across attempts", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    expect(await next(store, rolloutId, attemptId)).toBe(1);
    expect((await addSpan(store, rolloutId, attemptId)).sequenceId).toBe(2);
    expect(await next(store, rolloutId, attemptId)).toBe(3);
    expect((await addSpan(store, rolloutId, attemptId)).sequenceId).toBe(4);
    const other = (await store.startAttempt({ rolloutId })).latestAttempt!.attemptId;
    expect(await next(store, rolloutId, other)).toBe(5);
    expect((await addSpan(store, rolloutId, other)).sequenceId).toBe(6);
  });

  it("NextSpanSequenceIds handles mixed batches in request order", async () => {
    const { store } = await openStore(def);
    const r1 = await startRollout(store);
    const r2 = await startRollout(store);
    const a1b = (await store.startAttempt({ rolloutId: r1.rolloutId })).latestAttempt!.attemptId;
    const res = await store.nextSpanSequenceIds({
      requests: [
        { rolloutId: r1.rolloutId, attemptId: r1.attemptId },
        { rolloutId: r2.rolloutId, attemptId: r2.attemptId },
        { rolloutId: r1.rolloutId, attemptId: a1b },
        { rolloutId: r1.rolloutId, attemptId: r1.attemptId },
      ],
    });
    expect(res.sequenceIds).toEqual([1, 1, 2, 3]);
    expect(await next(store, r1.rolloutId, r1.attemptId)).toBe(4);
    expect(await next(store, r2.rolloutId, r2.attemptId)).toBe(2);
  });

  it("an explicit sequence id is kept and raises the counter", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    expect((await addSpan(store, rolloutId, attemptId, { sequenceId: 100 })).sequenceId).toBe(100);
    expect(await next(store, rolloutId, attemptId)).toBe(101);
    // A lower explicit id is kept as given and does not lower the counter.
    expect((await addSpan(store, rolloutId, attemptId, { sequenceId: 50 })).sequenceId).toBe(50);
    expect(await next(store, rolloutId, attemptId)).toBe(102);
    const seqs = (await store.querySpans({ rolloutId })).spans.map((s) => s.sequenceId);
    expect(seqs).toEqual([50, 100]);
  });

  it("sequence ids are uint32: past the largest one, allocation is OUT_OF_RANGE and changes nothing", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const largest = 2 ** 32 - 1;
    // An explicit id may take the largest value; the counter cannot then go further.
    expect((await addSpan(store, rolloutId, attemptId, { sequenceId: largest })).sequenceId).toBe(largest);
    await expectRejectedUnchanged(store, () => next(store, rolloutId, attemptId), Code.OutOfRange, rolloutId, "explicit");
    await expectRejectedUnchanged(store, () => addSpan(store, rolloutId, attemptId), Code.OutOfRange, rolloutId);
    await expectRejectedUnchanged(
      store,
      () => store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans: [makeSpan(rolloutId, attemptId)] }),
      Code.OutOfRange,
      rolloutId,
    );
    // Spans with explicit ids are still stored, and every stored id reads back as a uint32.
    expect((await addSpan(store, rolloutId, attemptId, { sequenceId: 7 })).sequenceId).toBe(7);
    expect((await store.querySpans({ rolloutId })).spans.map((s) => s.sequenceId)).toEqual([7, largest]);
  });

  it("an explicit sequence id that is no uint32 (in-process callers) is INVALID_ARGUMENT", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    for (const sequenceId of [2 ** 32, -1, 1.5, Number.NaN]) {
      await expectRejectedUnchanged(store, () => addSpan(store, rolloutId, attemptId, { sequenceId }), Code.InvalidArgument, "sequence_id");
    }
  });

  it("a retried batch is idempotent: acks say duplicate with the stored sequence ids", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const spans = [makeSpan(rolloutId, attemptId, { name: "a" }), makeSpan(rolloutId, attemptId, { name: "b" })];
    const first = await store.addSpans({ spans });
    const retried = spans.map((s) => create(SpanSchema, { ...s, name: "changed" }));
    const second = await store.addSpans({ spans: retried });
    expect(second.acks.map((a) => a.duplicate)).toEqual([true, true]);
    expect(second.acks.map((a) => a.sequenceId)).toEqual(first.acks.map((a) => a.sequenceId));
    expect(second.acks.map((a) => a.spanId)).toEqual(spans.map((s) => s.spanId));
    const stored = await store.querySpans({ rolloutId });
    expect(stored.page?.total).toBe(2);
    expect(stored.spans.map((s) => s.name)).toEqual(["a", "b"]);
    expect((await store.getStatistics({})).totalSpans).toBe(2);
  });

  it("a batch mixing stored and new spans stores only the new ones", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const old = makeSpan(rolloutId, attemptId);
    const oldAck = (await store.addSpans({ spans: [old] })).acks[0]!;
    const fresh = makeSpan(rolloutId, attemptId);
    const { acks } = await store.addSpans({ spans: [old, fresh] });
    expect(acks.map((a) => a.duplicate)).toEqual([true, false]);
    expect(acks[0]!.sequenceId).toBe(oldAck.sequenceId);
    expect(acks[1]!.sequenceId).toBeGreaterThan(oldAck.sequenceId);
    expect((await store.querySpans({ rolloutId })).spans.map((s) => s.spanId)).toEqual([old.spanId, fresh.spanId]);
  });

  it("the same span id in two attempts is two spans", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const other = (await store.startAttempt({ rolloutId })).latestAttempt!.attemptId;
    const spanId = "00000000000000aa";
    const { acks } = await store.addSpans({
      spans: [makeSpan(rolloutId, attemptId, { spanId }), makeSpan(rolloutId, other, { spanId })],
    });
    expect(acks.map((a) => a.duplicate)).toEqual([false, false]);
    expect((await store.querySpans({ rolloutId })).page?.total).toBe(2);
  });

  it("a span repeated within one batch is stored once", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const s = makeSpan(rolloutId, attemptId);
    let acks: Array<{ duplicate: boolean; sequenceId: number }> | undefined;
    try {
      acks = (await store.addSpans({ spans: [s, s] })).acks;
    } catch (e) {
      // Rejecting the batch is also acceptable, as long as nothing is stored.
      expect((e as { code?: number }).code).toBe(Code.InvalidArgument);
    }
    const stored = await store.querySpans({ rolloutId });
    if (acks) {
      expect(acks[1]!.duplicate).toBe(true);
      expect(acks[1]!.sequenceId).toBe(acks[0]!.sequenceId);
      expect(stored.page?.total).toBe(1);
    } else {
      expect(stored.page?.total).toBe(0);
    }
  });

  it("spans round-trip every field", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const span = create(SpanSchema, {
      rolloutId,
      attemptId,
      traceId: TRACE_A,
      spanId: "1111111111111111",
      parentId: "2222222222222222",
      name: "llm.call",
      status: { code: StatusCode.ERROR, description: "boom" },
      attributes: {
        s: { value: { case: "stringValue", value: "x" } },
        b: { value: { case: "boolValue", value: true } },
        i: { value: { case: "intValue", value: -(2n ** 40n) } },
        d: { value: { case: "doubleValue", value: 0.25 } },
        sa: { value: { case: "stringArray", value: { values: ["a", "b"] } } },
        ba: { value: { case: "boolArray", value: { values: [true, false] } } },
        ia: { value: { case: "intArray", value: { values: [1n, 2n] } } },
        da: { value: { case: "doubleArray", value: { values: [1.5] } } },
      },
      events: [{ name: "ev", timestamp: 12.5, attributes: { k: { value: { case: "stringValue", value: "v" } } } }],
      links: [{ context: { traceId: TRACE_B, spanId: "3333333333333333", isRemote: true }, attributes: {} }],
      startTime: 10.25,
      endTime: 11.75,
      context: { traceId: TRACE_A, spanId: "1111111111111111", traceState: { vendor: "x" } },
      parent: { traceId: TRACE_A, spanId: "2222222222222222" },
      resource: { attributes: { "service.name": { value: { case: "stringValue", value: "svc" } } }, schemaUrl: "u" },
    });
    const ack = (await store.addSpans({ spans: [span] })).acks[0]!;
    const [stored] = (await store.querySpans({ rolloutId })).spans;
    expect(stored).toEqual({ ...span, sequenceId: ack.sequenceId });
  });

  it("an attribute named __proto__ is kept as an attribute", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const span = makeSpan(rolloutId, attemptId);
    const value = { $typeName: "agl.v1.AttributeValue", value: { case: "stringValue", value: "p" } } as const;
    Object.defineProperty(span.attributes, "__proto__", { value, enumerable: true, writable: true, configurable: true });
    span.attributes.k = { ...value, value: { case: "stringValue", value: "k" } };
    await store.addSpans({ spans: [span] });
    const [stored] = (await store.querySpans({ rolloutId })).spans;
    expect(Object.keys(stored!.attributes)).toEqual(["__proto__", "k"]);
    expect(Object.getPrototypeOf(stored!.attributes)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(stored!.attributes, "__proto__")?.value?.value).toEqual({ case: "stringValue", value: "p" });
  });

  it("a batch with one bad span stores nothing", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const good = makeSpan(rolloutId, attemptId, { sequenceId: 100 });
    const bad = makeSpan(rolloutId, "at-00000000");
    await expectRejectedUnchanged(store, () => store.addSpans({ spans: [good, bad] }), Code.NotFound, "at-00000000");
    expect((await store.querySpans({ rolloutId })).spans).toEqual([]);
    const a = (await store.getLatestAttempt({ rolloutId })).attempt!;
    expect(a.status).toBe(AttemptStatus.PREPARING);
    expect(a.lastHeartbeatTime).toBeUndefined();
    // Nothing was written, not even the counter raise of the explicit sequence id.
    expect(await next(store, rolloutId, attemptId)).toBe(1);
  });

  it("a span of an unknown rollout is NOT_FOUND and stores nothing of the batch", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await expectRejectedUnchanged(
      store,
      () => store.addSpans({ spans: [makeSpan(rolloutId, attemptId), makeSpan("ro-000000000000", attemptId)] }),
      Code.NotFound,
      "ro-000000000000",
    );
    expect((await store.querySpans({ rolloutId })).page?.total).toBe(0);
  });

  it("queries spans by attempt: all, one attempt, latest", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId: a1 } = await startRollout(store);
    await store.addSpans({ spans: [makeSpan(rolloutId, a1), makeSpan(rolloutId, a1)] });
    await store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING });
    const [d] = (await store.dequeueRollouts({})).rollouts;
    const a2 = d!.latestAttempt!.attemptId;
    await store.addSpans({ spans: [0, 1, 2].map(() => makeSpan(rolloutId, a2)) });
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(5);
    const byA1 = (await store.querySpans({ rolloutId, attemptId: a1 })).spans;
    expect(byA1.map((s) => s.attemptId)).toEqual([a1, a1]);
    const byA2 = (await store.querySpans({ rolloutId, attemptId: a2 })).spans;
    expect(byA2.map((s) => s.sequenceId)).toEqual([3, 4, 5]);
    const latest = (await store.querySpans({ rolloutId, attemptId: "latest" })).spans;
    expect(latest.map((s) => s.spanId)).toEqual(byA2.map((s) => s.spanId));
  });

  it('"latest" of a rollout without attempts has no spans', async () => {
    const { store } = await openStore(def);
    const { rollouts } = await store.enqueueRollouts({ rollouts: [{}] });
    const res = await store.querySpans({ rolloutId: rollouts[0]!.rolloutId, attemptId: "latest" });
    expect(res.spans).toEqual([]);
    expect(res.page?.total).toBe(0);
  });

  describe("filters", () => {
    async function fixture() {
      const h = await openStore(def);
      const { rolloutId, attemptId } = await startRollout(h.store);
      const other = await startRollout(h.store);
      const spans = [
        makeSpan(rolloutId, attemptId, { spanId: "aaaa000000000001", traceId: TRACE_A, name: "phase.plan" }),
        makeSpan(rolloutId, attemptId, {
          spanId: "bbbb000000000002",
          traceId: TRACE_A,
          parentId: "aaaa000000000001",
          name: "llm.call",
        }),
        makeSpan(rolloutId, attemptId, {
          spanId: "cccc000000000003",
          traceId: TRACE_B,
          parentId: "aaaa000000000001",
          name: "phase.act",
        }),
      ];
      await h.store.addSpans({ spans });
      // A span of another rollout matching every filter below must never leak in.
      await h.store.addSpans({
        spans: [
          makeSpan(other.rolloutId, other.attemptId, {
            spanId: "aaaa000000000001",
            traceId: TRACE_A,
            parentId: "aaaa000000000001",
            name: "phase.plan",
          }),
        ],
      });
      return { ...h, rolloutId, attemptId };
    }
    const spanIds = (r: { spans: Array<{ spanId: string }> }) => r.spans.map((s) => s.spanId);

    it("exact and contains conditions", async () => {
      const { store, rolloutId } = await fixture();
      expect(spanIds(await store.querySpans({ rolloutId, traceId: TRACE_B }))).toEqual(["cccc000000000003"]);
      expect(spanIds(await store.querySpans({ rolloutId, traceIdContains: "fedcba" }))).toEqual(["cccc000000000003"]);
      expect(spanIds(await store.querySpans({ rolloutId, spanId: "bbbb000000000002" }))).toEqual(["bbbb000000000002"]);
      expect(spanIds(await store.querySpans({ rolloutId, spanIdContains: "cccc" }))).toEqual(["cccc000000000003"]);
      expect(spanIds(await store.querySpans({ rolloutId, parentId: "aaaa000000000001" }))).toEqual([
        "bbbb000000000002",
        "cccc000000000003",
      ]);
      expect(spanIds(await store.querySpans({ rolloutId, parentIdContains: "aaaa" }))).toHaveLength(2);
      expect(spanIds(await store.querySpans({ rolloutId, name: "llm.call" }))).toEqual(["bbbb000000000002"]);
      expect(spanIds(await store.querySpans({ rolloutId, nameContains: "phase" }))).toEqual(["aaaa000000000001", "cccc000000000003"]);
      expect(spanIds(await store.querySpans({ rolloutId, nameContains: "nothing" }))).toEqual([]);
    });

    it("AND requires every condition", async () => {
      const { store, rolloutId } = await fixture();
      const res = await store.querySpans({
        rolloutId,
        traceIdContains: "0123",
        spanIdContains: "bbbb",
        parentId: "aaaa000000000001",
        nameContains: "llm",
      });
      expect(spanIds(res)).toEqual(["bbbb000000000002"]);
      expect(spanIds(await store.querySpans({ rolloutId, spanIdContains: "bbbb", nameContains: "phase" }))).toEqual([]);
    });

    it("OR matches any condition and stays within the rollout", async () => {
      const { store, rolloutId } = await fixture();
      const res = await store.querySpans({
        rolloutId,
        spanId: "aaaa000000000001",
        traceIdContains: "fedcba",
        filterLogic: FilterLogic.OR,
      });
      expect(spanIds(res)).toEqual(["aaaa000000000001", "cccc000000000003"]);
      for (const s of res.spans) expect(s.rolloutId).toBe(rolloutId);
    });

    it("filters apply before pagination; sort and offset", async () => {
      const { store, rolloutId } = await fixture();
      const named = await store.querySpans({ rolloutId, nameContains: "act", page: { limit: 1 } });
      expect(spanIds(named)).toEqual(["cccc000000000003"]);
      const sorted = await store.querySpans({
        rolloutId,
        page: { sortBy: "span_id", sortOrder: SortOrder.DESC, limit: 1, offset: 1 },
      });
      expect(spanIds(sorted)).toEqual(["bbbb000000000002"]);
      expect(sorted.page?.total).toBe(3);
      const orSorted = await store.querySpans({
        rolloutId,
        nameContains: "phase",
        parentIdContains: "aaaa",
        spanId: "aaaa000000000001",
        filterLogic: FilterLogic.OR,
        page: { sortBy: "sequence_id", sortOrder: SortOrder.DESC, limit: 1, offset: 1 },
      });
      expect(spanIds(orSorted)).toEqual(["bbbb000000000002"]);
      expect(orSorted.page?.total).toBe(3);
    });

    it("reports pagination metadata", async () => {
      const { store, rolloutId } = await fixture();
      const res = await store.querySpans({ rolloutId, page: { limit: 1, offset: 1 } });
      expect(spanIds(res)).toEqual(["bbbb000000000002"]);
      expect(res.page?.total).toBe(3);
      expect(res.page?.limit).toBe(1);
      expect(res.page?.offset).toBe(1);
    });

    it("after_sequence_id reads incrementally", async () => {
      const { store, rolloutId } = await fixture();
      expect(spanIds(await store.querySpans({ rolloutId, afterSequenceId: 1 }))).toEqual(["bbbb000000000002", "cccc000000000003"]);
      const or = await store.querySpans({
        rolloutId,
        afterSequenceId: 2,
        name: "phase.plan",
        filterLogic: FilterLogic.OR,
      });
      expect(spanIds(or)).toEqual([]);
      expect(spanIds(await store.querySpans({ rolloutId, afterSequenceId: 3 }))).toEqual([]);
    });
  });
});

describe.each(backends)("spans carried by UpdateAttempt [$name]", (def) => {
  it("stores the last spans and the outcome in one call", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    await addSpan(store, rolloutId, attemptId);
    const spans = [makeSpan(rolloutId, attemptId), makeSpan(rolloutId, attemptId)];
    const attempt = await store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans });
    expect(attempt.status).toBe(AttemptStatus.SUCCEEDED);
    expect(attempt.lastHeartbeatTime).toBeDefined();
    const stored = (await store.querySpans({ rolloutId })).spans;
    expect(stored.map((s) => [s.spanId, s.sequenceId]).slice(1)).toEqual([
      [spans[0]!.spanId, 2],
      [spans[1]!.spanId, 3],
    ]);
    expect((await store.getRollout({ rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
  });

  it("a retried call stores nothing twice", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const spans = [makeSpan(rolloutId, attemptId), makeSpan(rolloutId, attemptId)];
    await store.updateAttempt({ rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED, spans });
    await store.updateAttempt({ rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED, spans });
    expect((await store.querySpans({ rolloutId })).page?.total).toBe(2);
  });

  it("spans of another attempt are INVALID_ARGUMENT and nothing changes", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const other = await startRollout(store);
    await expectRejectedUnchanged(
      store,
      () =>
        store.updateAttempt({
          rolloutId,
          attemptId,
          status: AttemptStatus.SUCCEEDED,
          spans: [makeSpan(rolloutId, attemptId), makeSpan(other.rolloutId, other.attemptId)],
        }),
      Code.InvalidArgument,
    );
  });

  it("an unknown attempt in the spans rejects the whole call", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const retry = (await store.startAttempt({ rolloutId })).latestAttempt!.attemptId;
    await expectRejectedUnchanged(
      store,
      () =>
        store.updateAttempt({
          rolloutId,
          attemptId: "latest",
          status: AttemptStatus.SUCCEEDED,
          spans: [makeSpan(rolloutId, retry), makeSpan(rolloutId, attemptId)],
        }),
      Code.InvalidArgument,
    );
  });

  it("ExpectSpans: promised spans hold the updates that finish the attempt or rollout until they land, are withdrawn, or lapse", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {}, "w");
    const expectSpans = (spanIds: string[], extra: { ttlMs?: number; withdraw?: boolean } = {}) =>
      store.expectSpans({ rolloutId, attemptId, spanIds, ...extra });
    await expectRejectedUnchanged(
      store,
      () => store.expectSpans({ rolloutId: "", attemptId, spanIds: ["s"] }),
      Code.InvalidArgument,
      /rollout_id/,
    );
    await expectRejectedUnchanged(store, () => expectSpans(["s"], { ttlMs: 3_600_000 }), Code.InvalidArgument, /ttl_ms/);
    if (def.name === "postgres") {
      // Another server may take the rollout's updates: the caller is told to store its spans first.
      await expectRejectedUnchanged(store, () => expectSpans(["s"]), Code.FailedPrecondition, /store the spans first/);
      return;
    }
    await expectRejectedUnchanged(
      store,
      () => store.expectSpans({ rolloutId: "ro-000000000000", attemptId, spanIds: ["s"] }),
      Code.NotFound,
    );
    const span = makeSpan(rolloutId, attemptId);
    await expectSpans([span.spanId]);
    const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    const settled = (p: Promise<unknown>) => Promise.race([p.then(() => true), sleep(100).then(() => false)]);
    expect(await settled(finished)).toBe(false);
    // Heartbeats and reads go on meanwhile.
    expect(await settled(store.updateAttempt({ rolloutId, attemptId, lastHeartbeatTime: 1 }))).toBe(true);
    expect(await settled(store.querySpans({ rolloutId }))).toBe(true);
    // The span lands (AddSpans, as the proxy sends it): the attempt finishes, with its span in.
    await store.addSpans({ spans: [span] });
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect((await store.querySpans({ rolloutId })).spans.map((s) => s.spanId)).toEqual([span.spanId]);

    // A withdrawn promise holds nothing; nor does one past its TTL.
    const other = await startRollout(store, {}, "w");
    await store.expectSpans({ rolloutId: other.rolloutId, attemptId: other.attemptId, spanIds: ["a1", "a2"] });
    await store.expectSpans({ rolloutId: other.rolloutId, attemptId: other.attemptId, spanIds: ["a1", "a2"], withdraw: true });
    expect(await settled(store.updateRollout({ rolloutId: other.rolloutId, status: RolloutStatus.SUCCEEDED }))).toBe(true);
    await store.updateRollout({ rolloutId: other.rolloutId, status: RolloutStatus.RUNNING });
    await store.expectSpans({ rolloutId: other.rolloutId, attemptId: other.attemptId, spanIds: ["a3"], ttlMs: 150 });
    // Cancelling never waits.
    expect(await settled(store.updateRollout({ rolloutId: other.rolloutId, status: RolloutStatus.CANCELLED }))).toBe(true);
    const lapsed = store.updateRollout({ rolloutId: other.rolloutId, status: RolloutStatus.FAILED });
    expect(await settled(lapsed)).toBe(false);
    expect((await lapsed).status).toBe(RolloutStatus.FAILED);
    // A caller that gives up stops waiting.
    await store.expectSpans({ rolloutId: other.rolloutId, attemptId: other.attemptId, spanIds: ["a4"] });
    const gaveUp = store.updateRollout(
      { rolloutId: other.rolloutId, status: RolloutStatus.SUCCEEDED },
      { signal: AbortSignal.timeout(50) },
    );
    await expect(gaveUp).rejects.toMatchObject({ code: Code.DeadlineExceeded });
    expect((await store.getRollout({ rolloutId: other.rolloutId })).status).toBe(RolloutStatus.FAILED);
  });

  it("AddSpans expect with describe_attempt: the attempt as the LLM proxy checks it before serving it, on every backend", async () => {
    const { store } = await openStore(def);
    // Started before any resources were published: it has none.
    const plain = await startRollout(store, { metadata: { agl_token_in: "yes" } }, "w");
    const { resourcesId } = await store.addResources({ resources: {} });
    const { rolloutId, attemptId } = await startRollout(store, { resourcesId, metadata: { agl_token_in: true } }, "w");
    const span = makeSpan(rolloutId, attemptId);
    const describe = (r: string, a: string) => ({ rolloutId: r, attemptId: a, describeAttempt: true });
    const response = await store.addSpans({
      spans: [span],
      expect: [
        describe(rolloutId, attemptId),
        { rolloutId, attemptId, spanIds: ["p1"], withdraw: true },
        describe(rolloutId, "at-ffffffff"),
        describe("ro-000000000000", attemptId),
        describe(plain.rolloutId, plain.attemptId),
      ],
    });
    expect(response.acks.map((a) => a.spanId)).toEqual([span.spanId]);
    const described = response.expectAttempts.map(({ rolloutExists, attemptExists, resourcesId, tokenIn }) => ({
      rolloutExists,
      attemptExists,
      resourcesId,
      tokenIn,
    }));
    const none = { rolloutExists: false, attemptExists: false, resourcesId: "", tokenIn: undefined };
    expect(described).toEqual([
      { rolloutExists: true, attemptExists: true, resourcesId, tokenIn: true },
      none, // did not ask
      { rolloutExists: true, attemptExists: false, resourcesId, tokenIn: true },
      none,
      { rolloutExists: true, attemptExists: true, resourcesId: "", tokenIn: undefined },
    ]);
    // Promises of no spans: held where the rollout exists, as promises are (never on PostgreSQL).
    const held = def.name !== "postgres";
    expect(response.expectHeld).toEqual([held, held, held, false, held]);
    // Without a describe_attempt entry, the answer describes nothing.
    expect(
      (await store.addSpans({ spans: [], expect: [{ rolloutId, attemptId, spanIds: ["p2"], withdraw: true }] })).expectAttempts,
    ).toEqual([]);
  });

  it("AddSpans expect: promises ride on a batch, taken once its spans are stored, each reported in expect_held", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store, {}, "w");
    const first = makeSpan(rolloutId, attemptId);
    const promisedSpan = makeSpan(rolloutId, attemptId);
    const unknownRollout = { rolloutId: "ro-000000000000", attemptId, spanIds: ["s"] };
    // A malformed promise fails the whole call, before anything is stored.
    await expectRejectedUnchanged(
      store,
      () => store.addSpans({ spans: [first], expect: [{ rolloutId, attemptId, spanIds: [""] }] }),
      Code.InvalidArgument,
      /expect\[0\]\.span_ids\[0\]/,
    );
    // A refused batch takes none of its promises.
    await expect(
      store.addSpans({
        spans: [makeSpan("ro-000000000000", attemptId)],
        expect: [{ rolloutId, attemptId, spanIds: [promisedSpan.spanId] }],
      }),
    ).rejects.toMatchObject({ code: Code.NotFound });
    const response = await store.addSpans({
      spans: [first],
      expect: [{ rolloutId, attemptId, spanIds: [promisedSpan.spanId] }, unknownRollout],
    });
    expect(response.acks.map((a) => a.spanId)).toEqual([first.spanId]);
    const settled = (p: Promise<unknown>) => Promise.race([p.then(() => true), sleep(100).then(() => false)]);
    if (def.name === "postgres") {
      // Not held, as ExpectSpans would refuse them: the sender stores those spans first. The batch is stored.
      expect(response.expectHeld).toEqual([false, false]);
      expect(await settled(store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED }))).toBe(true);
      return;
    }
    expect(response.expectHeld).toEqual([true, false]);
    const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect(await settled(finished)).toBe(false);
    // A batch of no spans only carries promises; the next batch brings the promised span, and the attempt finishes.
    expect((await store.addSpans({ spans: [], expect: [{ rolloutId, attemptId, spanIds: ["x1"], withdraw: true }] })).expectHeld).toEqual([
      true,
    ]);
    expect(await settled(finished)).toBe(false);
    await store.addSpans({ spans: [promisedSpan] });
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect((await store.querySpans({ rolloutId })).spans.map((s) => s.spanId)).toEqual([first.spanId, promisedSpan.spanId]);
  });
});
