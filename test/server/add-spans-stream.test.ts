/** AddSpansStream over a real server and the gRPC client: each request answered by id, failures included, in one stream. */
import { Code } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AddSpansStreamResponse } from "../../src/gen/agl/v1/store_pb.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { claimAttempt, makeSpans, type StoreHarness, startStoreHarness } from "../support/store-harness.js";

let h: StoreHarness;
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  await h.close();
});

const settledWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

/** Requests sent one by one as the test goes; `send(undefined)` ends them. */
function requestStream() {
  const queue: (object | undefined)[] = [];
  let wake: (() => void) | undefined;
  return {
    send(request: object | undefined) {
      queue.push(request);
      wake?.();
    },
    async *requests() {
      while (true) {
        while (queue.length > 0) {
          const request = queue.shift();
          if (!request) return;
          yield request;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

describe("AddSpansStream", () => {
  it("stores each request as AddSpans does and answers it by id; a failed request fails alone", async () => {
    const ids = await claimAttempt(h.client);
    const unknown = { rolloutId: "ro-000000000000", attemptId: "at-00000000" };
    const [a, b, promised] = makeSpans(ids, 3);
    // The requests go one at a time, each after the answer to the one before: the stream stays open in between.
    let next!: (request: object | undefined) => void;
    async function* requests() {
      while (true) {
        const request = await new Promise<object | undefined>((resolve) => (next = resolve));
        if (!request) return;
        yield request;
      }
    }
    const answers = h.client.addSpansStream(requests())[Symbol.asyncIterator]();
    const ask = async (request: object | undefined) => {
      next(request);
      return (await answers.next()).value as AddSpansStreamResponse | undefined;
    };
    const first = await ask({ id: 7, spans: [a] });
    expect(first?.id).toBe(7);
    expect(first?.errorCode).toBe(0);
    expect(first?.response?.acks.map((ack) => ack.spanId)).toEqual([a?.spanId]);
    const refused = await ask({ id: 8, spans: makeSpans(unknown, 1, "u") });
    expect(refused).toMatchObject({ id: 8, errorCode: Code.NotFound });
    expect(refused?.errorMessage).toMatch(/ro-000000000000/);
    const third = await ask({ id: 9, spans: [b], expect: [{ ...ids, spanIds: [promised?.spanId ?? ""] }] });
    expect(third?.response?.expectHeld).toEqual([true]);
    // The promise taken through the stream holds the attempt's end until its span lands.
    const finished = h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED });
    const settled = await Promise.race([finished.then(() => true), new Promise((r) => setTimeout(() => r(false), 100))]);
    expect(settled).toBe(false);
    expect((await ask({ id: 10, spans: [promised] }))?.response?.acks).toHaveLength(1);
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    // The end of the requests ends the stream.
    next(undefined);
    expect((await answers.next()).done).toBe(true);
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans.map((s) => s.spanId)).toEqual(
      [a, b, promised].map((s) => s?.spanId),
    );
  });

  it("holds an attempt's end until the sender releases the hold it asked for back, after the spans it had", async () => {
    const ids = await claimAttempt(h.client);
    const [a, b] = makeSpans(ids, 2);
    const stream = requestStream();
    const answers = h.client.addSpansStream(stream.requests())[Symbol.asyncIterator]();
    const next = async () => (await answers.next()).value as AddSpansStreamResponse;
    const hold = { ...ids, spanIds: ["hold-1"], hold: true };
    stream.send({ id: 1, spans: [a], expect: [hold] });
    expect((await next()).response).toMatchObject({ expectHeld: [true], holds: true });
    // A finishing update waits, and the store asks for the hold back on the stream (id 0); reads do not wait.
    const finished = h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED });
    const asked = await next();
    expect(asked.id).toBe(0);
    expect(asked.release).toHaveLength(1);
    expect(asked.release[0]).toMatchObject({ ...hold, withdraw: true });
    expect(await settledWithin(finished, 100)).toBe(false);
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(1);
    // Taken again, the hold is renewed: the update still waits for its release.
    stream.send({ id: 2, expect: [hold] });
    expect((await next()).response?.expectHeld).toEqual([true]);
    expect(await settledWithin(finished, 100)).toBe(false);
    // The sender stores what it had, then sends back what the store asked for.
    stream.send({ id: 3, spans: [b] });
    expect((await next()).id).toBe(3);
    stream.send({ id: 4, expect: asked.release });
    expect((await next()).response?.expectHeld).toEqual([true]);
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(2);
    stream.send(undefined);
    expect((await answers.next()).done).toBe(true);
  });

  it("keeps a hold after its stream ended, until released on another call or its TTL passed", async () => {
    const first = await claimAttempt(h.client);
    const second = await claimAttempt(h.client);
    const stream = requestStream();
    const answers = h.client.addSpansStream(stream.requests())[Symbol.asyncIterator]();
    const holdOf = (ids: typeof first, ttlMs: number) => ({ ...ids, spanIds: [`hold-${ids.rolloutId}`], hold: true, ttlMs });
    stream.send({ id: 1, expect: [holdOf(first, 60_000), holdOf(second, 300)] });
    expect(((await answers.next()).value as AddSpansStreamResponse).response?.expectHeld).toEqual([true, true]);
    stream.send(undefined);
    expect((await answers.next()).done).toBe(true);
    const ends = [first, second].map((ids) => h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED }));
    expect(await settledWithin(ends[0] as Promise<unknown>, 100)).toBe(false);
    // Released by a plain call: a release needs no stream.
    await h.client.expectSpans({ ...holdOf(first, 0), withdraw: true });
    expect((await ends[0])?.status).toBe(AttemptStatus.SUCCEEDED);
    // The other ends with its TTL.
    expect((await ends[1])?.status).toBe(AttemptStatus.SUCCEEDED);
  });

  it("takes a hold on the stream only, named by one id", async () => {
    const ids = await claimAttempt(h.client);
    const hold = { ...ids, spanIds: ["hold-1"], hold: true };
    // Not on AddSpans (no stream to ask for it back on): reported not held; ExpectSpans refuses it.
    expect((await h.client.addSpans({ expect: [hold] })).expectHeld).toEqual([false]);
    await expect(h.client.expectSpans(hold)).rejects.toMatchObject({ code: Code.FailedPrecondition });
    const stream = requestStream();
    const answers = h.client.addSpansStream(stream.requests())[Symbol.asyncIterator]();
    stream.send({ id: 1, expect: [{ ...hold, spanIds: [] }] });
    const refused = (await answers.next()).value as AddSpansStreamResponse;
    expect(refused).toMatchObject({ id: 1, errorCode: Code.InvalidArgument });
    expect(refused.errorMessage).toMatch(/expect\[0\]\.span_ids: a hold is named by one id/);
    stream.send(undefined);
    // Nothing was held: the attempt ends at once.
    expect((await h.client.updateAttempt({ ...ids, status: AttemptStatus.SUCCEEDED })).status).toBe(AttemptStatus.SUCCEEDED);
  });

  it("over HTTP/1.1 (Connect) is refused as UNIMPLEMENTED, naming HTTP/2 and the unary method to call instead", async () => {
    // fetch speaks HTTP/1.1 to the server's port (gRPC clients negotiate HTTP/2 on the same port).
    const res = await fetch(`${h.url}/agl.v1.LightningStore/AddSpansStream`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1" },
      body: JSON.stringify({ spans: [] }),
    });
    expect(res.status).toBe(501);
    const error = (await res.json()) as { code: string; message: string };
    expect(error.code).toBe("unimplemented");
    expect(error.message).toMatch(/needs gRPC over HTTP\/2; over HTTP\/1\.1 call AddSpans$/);
  });
});
