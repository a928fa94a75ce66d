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
