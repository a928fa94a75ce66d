/** The proxy's span stream against a real store server: batches as messages on one AddSpansStream, answered by id. */
import { Code } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { createSpanStream } from "../../src/proxy/span-stream.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { claimAttempt, makeSpans, type StoreHarness, startStoreHarness } from "../support/store-harness.js";

let h: StoreHarness;
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  await h.close();
});

/** The client, counting the streams it opens and its unary AddSpans calls. */
function counted(client: StoreApi) {
  const counts = { streams: 0, unary: 0 };
  const store: StoreApi = {
    ...client,
    addSpans(request, options) {
      counts.unary++;
      return client.addSpans(request, options);
    },
    addSpansStream(requests, options) {
      counts.streams++;
      return client.addSpansStream(requests, options);
    },
  };
  return { store, counts };
}

describe("span stream", () => {
  it("answers concurrent batches by id on one stream; a refused batch fails alone; after close, batches are calls", async () => {
    const ids = await claimAttempt(h.client);
    const { store, counts } = counted(h.client);
    const stream = createSpanStream(store, silentLogger);
    const spans = makeSpans(ids, 5);
    const answers = await Promise.all(spans.map((span) => stream.addSpans({ spans: [span] }, { timeoutMs: 5_000 })));
    expect(answers.map((a) => a.acks[0]?.spanId)).toEqual(spans.map((s) => s.spanId));
    const unknown = makeSpans({ rolloutId: "ro-000000000000", attemptId: "at-00000000" }, 1, "u");
    await expect(stream.addSpans({ spans: unknown })).rejects.toMatchObject({ code: Code.NotFound });
    const more = makeSpans(ids, 2, "m");
    expect((await stream.addSpans({ spans: more })).acks).toHaveLength(2);
    expect(counts).toEqual({ streams: 1, unary: 0 });
    stream.close();
    const last = makeSpans(ids, 1, "l");
    expect((await stream.addSpans({ spans: last })).acks).toHaveLength(1);
    expect(counts).toEqual({ streams: 1, unary: 1 });
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(8);
  });

  it("fails a batch the store does not answer in time at its own deadline, the earliest first, and goes on", async () => {
    const ids = await claimAttempt(h.client);
    const { store, counts } = counted(h.client);
    // The store's answers are held back until `release`, as from a store too busy to answer.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const slow: StoreApi = {
      ...store,
      addSpansStream: (requests, options) =>
        (async function* () {
          for await (const answer of store.addSpansStream(requests, options)) {
            await released;
            yield answer;
          }
        })(),
    };
    const stream = createSpanStream(slow, silentLogger);
    const failed: string[] = [];
    const batch = (prefix: string, timeoutMs: number) =>
      stream.addSpans({ spans: makeSpans(ids, 1, prefix) }, { timeoutMs }).catch((error) => {
        failed.push(`${prefix} ${error.code === Code.DeadlineExceeded ? "deadline" : error.code}`);
      });
    const started = Date.now();
    await Promise.all([batch("a", 300), batch("b", 100)]);
    expect(failed).toEqual(["b deadline", "a deadline"]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    release();
    expect((await stream.addSpans({ spans: makeSpans(ids, 1, "c") }, { timeoutMs: 5_000 })).acks).toHaveLength(1);
    expect(counts.streams).toBe(1);
    stream.close();
  });

  it("fails the batches in flight when the store goes away, and opens a new stream for the next", async () => {
    const ids = await claimAttempt(h.client);
    const { store, counts } = counted(h.client);
    const stream = createSpanStream(store, silentLogger);
    expect((await stream.addSpans({ spans: makeSpans(ids, 1) })).acks).toHaveLength(1);
    await h.server.close();
    const gone = [Code.Unavailable, Code.Canceled];
    // The first goes on the old stream (failed with it) or a new one; by the second the old one has failed.
    for (const prefix of ["x", "y"]) {
      const failed = await stream.addSpans({ spans: makeSpans(ids, 1, prefix) }, { timeoutMs: 5_000 }).catch((e) => e);
      expect(gone).toContain(failed.code);
    }
    expect(counts.streams).toBeGreaterThanOrEqual(2);
    stream.close();
  });
});
