/** The one span writer, against a real store server. */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeSpans } from "../../src/client/span-writer.js";
import { AttemptStatus, type Span } from "../../src/gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { claimAttempt, makeSpans, type StoreHarness, startStoreHarness } from "../support/store-harness.js";

let h: StoreHarness;
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  await h.close();
});

/**
 * The client, with every AddSpans call's size recorded and the first `failures` calls failing with `code` (or the calls
 * `refuse` picks).
 */
function observed(store: StoreApi, failures = 0, code = Code.Unavailable, refuse: (spans: Span[]) => boolean = () => false) {
  const calls: number[] = [];
  /** Per call, how many span promises rode on it. */
  const promises: number[] = [];
  const wrapped = new Proxy(store, {
    get(target, key, receiver) {
      if (key !== "addSpans") return Reflect.get(target, key, receiver);
      return async (req: { spans: Span[]; expect?: { spanIds?: string[] }[] }, options?: object) => {
        calls.push(req.spans.length);
        promises.push(req.expect?.length ?? 0);
        if (calls.length <= failures || refuse(req.spans)) throw new ConnectError("the store cannot take this", code);
        return target.addSpans(req, options);
      };
    },
  });
  return { store: wrapped, calls, promises };
}

describe("writeSpans", () => {
  it("writes in calls of at most maxPerCall, in order, and returns one ack per span", async () => {
    const ids = await claimAttempt(h.client);
    const { store, calls } = observed(h.client);
    const { acks, failed } = await writeSpans(store, makeSpans(ids, 25), { maxPerCall: 10 });
    expect(calls).toEqual([10, 10, 5]);
    expect(failed).toEqual([]);
    expect(acks).toHaveLength(25);
    const stored = (await h.client.querySpans({ rolloutId: ids.rolloutId })).spans;
    expect(stored.map((s) => s.name)).toEqual(makeSpans(ids, 25).map((s) => s.name));
  });

  it("retries a transient failure when asked to, and the retry stores nothing twice", async () => {
    const ids = await claimAttempt(h.client);
    const once = observed(h.client, 1);
    const first = await writeSpans(once.store, makeSpans(ids, 3));
    expect(first.failed).toMatchObject([{ refused: false, tries: 1 }]);
    expect(first.failed[0]?.error.code).toBe(Code.Unavailable);

    const retried = observed(h.client, 2);
    const second = await writeSpans(retried.store, makeSpans(ids, 3), { retry: { tries: 5, baseMs: 1 } });
    expect(retried.calls).toEqual([3, 3, 3]);
    expect(second.failed).toEqual([]);
    expect(second.acks.map((a) => a.duplicate)).toEqual([false, false, false]);
    const third = await writeSpans(h.client, makeSpans(ids, 3));
    expect(third.acks.map((a) => a.duplicate)).toEqual([true, true, true]);
  });

  it("keeps a batch's good spans when the store refuses another attempt's, without retrying the refusal", async () => {
    const ids = await claimAttempt(h.client);
    const unknown = { rolloutId: "ro-000000000000", attemptId: "at-00000000" };
    const { store, calls } = observed(h.client);
    const { acks, failed } = await writeSpans(store, [...makeSpans(ids, 4), ...makeSpans(unknown, 2, "u")], {
      retry: { tries: 5, baseMs: 1 },
    });
    expect(acks).toHaveLength(4);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ refused: true, tries: 1 });
    expect(failed[0]?.error.code).toBe(Code.NotFound);
    expect(failed[0]?.spans.map((s) => s.rolloutId)).toEqual([unknown.rolloutId, unknown.rolloutId]);
    expect(calls).toEqual([6, 4, 2]);
  });

  it("halves a batch the store finds too large until only what is too large alone is left", async () => {
    const ids = await claimAttempt(h.client);
    const spans = makeSpans(ids, 8);
    const tooLarge = spans[5]!;
    const { store, calls } = observed(h.client, 0, Code.ResourceExhausted, (batch) => batch.includes(tooLarge));
    const { acks, failed } = await writeSpans(store, spans);
    expect(calls.sort()).toEqual([1, 1, 2, 2, 4, 4, 8]);
    expect(failed.map((f) => f.spans)).toEqual([[tooLarge]]);
    expect(failed[0]?.error.code).toBe(Code.ResourceExhausted);
    expect(acks).toHaveLength(7);
  });
  it("sends span promises with the first call only, says which the store holds, and holds them as ExpectSpans does", async () => {
    const ids = await claimAttempt(h.client);
    const unknown = { rolloutId: "ro-000000000000", attemptId: "at-00000000" };
    const promised = makeSpans(ids, 1, "p")[0]!;
    const { store, calls, promises } = observed(h.client);
    const result = await writeSpans(store, makeSpans(ids, 5), {
      maxPerCall: 2,
      expect: [
        { ...ids, spanIds: [promised.spanId] },
        { ...unknown, spanIds: ["p2"] },
      ],
    });
    expect(calls).toEqual([2, 2, 1]);
    expect(promises).toEqual([2, 0, 0]);
    expect(result.acks).toHaveLength(5);
    expect(result.expectHeld).toEqual([true, false]);
    // The promise holds the attempt's end until its span lands.
    const finished = h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED });
    const settled = await Promise.race([finished.then(() => true), new Promise((r) => setTimeout(() => r(false), 100))]);
    expect(settled).toBe(false);
    // Promises alone: one call, with no spans.
    const alone = await writeSpans(store, [], { expect: [{ ...ids, spanIds: ["p3"], withdraw: true }] });
    expect(alone.expectHeld).toEqual([true]);
    expect(calls.slice(3)).toEqual([0]);
    await writeSpans(h.client, [promised]);
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
  });

  it("reports span promises not held when their call is refused, and sends them on no other call", async () => {
    const ids = await claimAttempt(h.client);
    const unknown = { rolloutId: "ro-000000000000", attemptId: "at-00000000" };
    const { store, calls, promises } = observed(h.client);
    const result = await writeSpans(store, [...makeSpans(ids, 2), ...makeSpans(unknown, 1, "u")], {
      expect: [{ ...ids, spanIds: ["p1"] }],
    });
    expect(calls).toEqual([3, 2, 1]);
    expect(promises).toEqual([1, 0, 0]);
    expect(result.acks).toHaveLength(2);
    expect(result.expectHeld).toBeUndefined();
    // Nothing holds the attempt's end.
    expect((await h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED })).status).toBe(AttemptStatus.SUCCEEDED);
  });
});
