/** The one span writer, against a real store server. */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeSpans } from "../../src/client/span-writer.js";
import type { Span } from "../../src/gen/agl/v1/types_pb.js";
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
  const wrapped = new Proxy(store, {
    get(target, key, receiver) {
      if (key !== "addSpans") return Reflect.get(target, key, receiver);
      return async (req: { spans: Span[] }, options?: object) => {
        calls.push(req.spans.length);
        if (calls.length <= failures || refuse(req.spans)) throw new ConnectError("the store cannot take this", code);
        return target.addSpans(req, options);
      };
    },
  });
  return { store: wrapped, calls };
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
});
