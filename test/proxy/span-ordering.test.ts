/**
 * When a call's span lands relative to the end of its answer. The guarantee either way: once an agent got its answer,
 * its runner cannot finish the attempt (nor anyone read the attempt's spans) without that call's span. With the store
 * elsewhere, an attempt's first call promises its span, riding on the `AddSpans` of the calls before it (`expect`, a
 * message on the proxy's `AddSpansStream`); its second takes a hold of the attempt there, and its later calls answer
 * on the hold, their spans stored in batches; the attempt's end asks for the hold back. Against a store that predates
 * holds, every call promises its span; against one that predates both, batches are `AddSpans` calls and promises go
 * alone (`ExpectSpans`).
 */
import { silentLogger } from "../../src/core/logger.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { addSpansStreamMethod } from "../../src/store/add-spans-stream.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import type { AddSpansFrom } from "../../src/store/span-promises.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { createStore, type Store } from "../../src/store/store.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { postJson } from "../support/proxy-harness.js";
import { claimAttempt } from "../support/store-harness.js";

let store: Store;
let engine: FakeVllm;
let proxy: LlmProxy;
let server: StoreServer | undefined;
let client: StoreClient | undefined;
afterEach(async () => {
  await proxy?.close();
  client?.close();
  await server?.close();
  await engine?.close();
  await store?.close();
  server = client = undefined;
});

/**
 * A store whose span writes wait until `open()` (the store is slow, or far away), or fail with `fail()`. An `AddSpans`
 * with no spans (it only carries span promises) writes nothing and is not held up.
 */
function slowSpanWrites(inner: Store) {
  let open!: () => void;
  let fail!: () => void;
  const gate = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = () => reject(new ConnectError("disk full", Code.ResourceExhausted));
  });
  gate.catch(() => {});
  let stored = 0;
  const addSpans: AddSpansFrom = async (request, options, holder) => {
    if (!request.spans?.length) return inner.addSpans(request, options, holder);
    await gate;
    const response = await inner.addSpans(request, options, holder);
    stored++;
    return response;
  };
  const slow: StoreApi = { ...inner, addSpans, addSpansStream: addSpansStreamMethod(addSpans) };
  return { slow, open, fail, stored: () => stored };
}

const settledWithin = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

/**
 * The proxy with the store in its process (`agl serve --proxy`), or the store behind a real server on a socket
 * (`agl proxy`), answering first with span promises or storing each span first.
 */
async function start(where: "in process" | "elsewhere" | "elsewhere, span first") {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  engine = await startFakeVllm();
  const writes = slowSpanWrites(store);
  let proxyStore: StoreApi = writes.slow;
  if (where !== "in process") {
    server = await startStoreServer({ store: writes.slow, port: 0 });
    proxyStore = client = createStoreClient({ baseUrl: server.url });
  }
  proxy = createLlmProxy({
    store: proxyStore,
    ...(where === "in process" ? { pendingWrites: store.pendingWrites } : {}),
    ...(where === "elsewhere, span first" ? { spanPromises: false } : {}),
    backends: [{ endpoint: engine.url, model: engine.model }],
    logger: silentLogger,
  });
  const url = await proxy.listen(0);
  await store.enqueueRollouts({ rollouts: [{}] });
  const [rollout] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
  const rolloutId = rollout!.rolloutId;
  const attemptId = rollout!.latestAttempt!.attemptId;
  // What a runner sees: the store in process, or a client of its server.
  const runnerStore: StoreApi = client ?? store;
  return { ...writes, runnerStore, rolloutId, attemptId, baseUrl: `${url}/rollout/${rolloutId}/attempt/${attemptId}/v1` };
}

describe.each([false, true])("span ordering (stream: %s)", (stream) => {
  const body = { model: "fake-model", messages: [{ role: "user", content: "hi" }], stream };

  it.each(["in process", "elsewhere"] as const)(
    "with the store %s: answers first, and the attempt's finishing update waits for the span",
    async (where) => {
      const { open, stored, runnerStore, rolloutId, attemptId, baseUrl } = await start(where);
      const res = await postJson(`${baseUrl}/chat/completions`, body);
      const text = await res.text();
      expect(text).toContain(stream ? "data: [DONE]" : "chat.completion");
      expect(stored()).toBe(0);

      // What a runner does once its agent returned: report the attempt finished.
      const finished = runnerStore.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
      // In process the span's write is moments away, and span reads wait for it too; promised from elsewhere, only the
      // updates that finish the attempt or rollout wait (docs/store-semantics.md, difference 10).
      const read =
        where === "in process" ? runnerStore.querySpans({ rolloutId }) : finished.then(() => runnerStore.querySpans({ rolloutId }));
      expect(await settledWithin(finished, 100)).toBe(false);
      expect((await store.getRollout({ rolloutId })).latestAttempt?.status).not.toBe(AttemptStatus.SUCCEEDED);

      open();
      expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
      expect(stored()).toBe(1);
      const { spans } = await read;
      expect(spans).toHaveLength(1);
      expect(spans[0]?.status?.code).toBe(StatusCode.OK);
      expect(res.headers.get("x-agl-span-id")).toBe(spans[0]?.spanId);
    },
  );

  it("with the store elsewhere: a span whose write failed no longer holds the attempt's updates", async () => {
    const { fail, runnerStore, rolloutId, attemptId, baseUrl } = await start("elsewhere");
    await (await postJson(`${baseUrl}/chat/completions`, body)).text();
    const finished = runnerStore.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect(await settledWithin(finished, 100)).toBe(false);
    fail();
    expect(await settledWithin(finished, 2_000)).toBe(true);
    expect(proxy.status().spanWriteErrors).toBe(1);
  });

  it("with the store elsewhere: the attempt's end waits for the span of a call still in progress when it came", async () => {
    const { open, runnerStore, rolloutId, attemptId, baseUrl } = await start("elsewhere");
    open();
    await (await postJson(`${baseUrl}/chat/completions`, body)).text();
    engine.setOptions({ latencyMs: 300 });
    let answered = false;
    const second = postJson(`${baseUrl}/chat/completions`, body)
      .then((res) => res.text())
      .then(() => (answered = true));
    await new Promise((resolve) => setTimeout(resolve, 50)); // the call reached the engine
    // The store asks the proxy for the attempt's hold back; the proxy releases it once the call's span is stored.
    const finished = runnerStore.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect(answered).toBe(true);
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(2);
    await second;
  });

  it("with the store elsewhere: a call refused after its check leaves no promise for the attempt's end to wait for", async () => {
    const { open, runnerStore, rolloutId, attemptId, baseUrl } = await start("elsewhere");
    open();
    // Its check described the attempt with the call's promise; then the paused proxy refused it.
    proxy.pause({ mode: "reject" });
    const refused = await postJson(`${baseUrl}/chat/completions`, body);
    expect(refused.status).toBe(429);
    const startedAt = Date.now();
    expect((await runnerStore.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED })).status).toBe(
      AttemptStatus.SUCCEEDED,
    );
    expect(Date.now() - startedAt).toBeLessThan(5_000); // withdrawn, not timed out (10 s)
  });

  it("with the store elsewhere: a hold whose stream broke is released on the next once the store is back", async () => {
    const { open, rolloutId, attemptId, baseUrl } = await start("elsewhere");
    open();
    // The second call takes the hold.
    for (let i = 0; i < 2; i++) await (await postJson(`${baseUrl}/chat/completions`, body)).text();
    while ((await store.querySpans({ rolloutId })).spans.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    // The store's server goes away and comes back on the same port; the store keeps the hold.
    const port = Number(new URL((server as StoreServer).url).port);
    await server?.close();
    const again = slowSpanWrites(store);
    again.open();
    server = await startStoreServer({ store: again.slow, port });
    const startedAt = Date.now();
    const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect(Date.now() - startedAt).toBeLessThan(8_000); // released, not timed out (10 s)
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(2);
  });

  it("with the store elsewhere and span promises off: stores the span before the end of the answer reaches the client", async () => {
    const { open, stored, rolloutId, baseUrl } = await start("elsewhere, span first");
    const answer = postJson(`${baseUrl}/chat/completions`, body).then((res) => res.text());
    expect(await settledWithin(answer, 100)).toBe(false);
    open();
    expect(await answer).toContain(stream ? "data: [DONE]" : "chat.completion");
    expect(stored()).toBe(1);
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(1);
  });
});

/**
 * A store server counting its calls: per `AddSpans`, its spans and promises; `ExpectSpans` and `GetRollout` calls. The
 * store it serves reads `expect`, predates it (skips the field, as any protobuf decoder skips one it does not know, and
 * answers no `expect_held`), or cannot hold promises, as a PostgreSQL store answers (it still describes attempts).
 */
async function startCounted(kind: "reads expect" | "predates holds" | "predates expect" | "holds no promises") {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  engine = await startFakeVllm();
  const addSpans: { spans: number; promises: number }[] = [];
  let expectSpans = 0;
  let getRollouts = 0;
  let streams = 0;
  const countedAddSpans: AddSpansFrom = async (request, options, holder) => {
    addSpans.push({ spans: request.spans?.length ?? 0, promises: request.expect?.length ?? 0 });
    if (kind === "reads expect") return store.addSpans(request, options, holder);
    if (kind === "predates expect") return store.addSpans({ spans: request.spans }, options);
    // It skips `hold`: a hold is a promise of a span with the hold's id, and the answer says nothing of holds.
    if (kind === "predates holds")
      return store.addSpans({ spans: request.spans, expect: request.expect?.map((e) => ({ ...e, hold: false })) }, options);
    // Promises of no spans: only what describe_attempt asks for is answered.
    const expect = request.expect?.map((e) => ({ ...e, spanIds: [], hold: false }));
    const response = await store.addSpans({ spans: request.spans, expect }, options);
    return { ...response, expectHeld: (request.expect ?? []).map(() => false) };
  };
  const served: StoreApi = {
    ...store,
    addSpans: countedAddSpans,
    // A store from before `expect` had no AddSpansStream either: it answers UNIMPLEMENTED.
    addSpansStream:
      kind === "predates expect"
        ? (undefined as never)
        : (requests, options) => {
            streams++;
            return addSpansStreamMethod(countedAddSpans)(requests, options);
          },
    getRollout(request, options) {
      getRollouts++;
      return store.getRollout(request, options);
    },
    expectSpans(request, options) {
      expectSpans++;
      if (kind === "holds no promises") throw new ConnectError("a PostgreSQL store cannot hold span promises", Code.FailedPrecondition);
      return store.expectSpans(request, options);
    },
  };
  server = await startStoreServer({ store: served, port: 0 });
  client = createStoreClient({ baseUrl: server.url });
  // Spans wait for the next call to carry them (or the proxy's close), however slow the machine.
  proxy = createLlmProxy({
    store: client,
    backends: [{ endpoint: engine.url, model: engine.model }],
    spanBatchMs: 60_000,
    logger: silentLogger,
  });
  const url = await proxy.listen(0);
  const { rolloutId, attemptId } = await claimAttempt(store);
  return {
    addSpans,
    expectSpans: () => expectSpans,
    getRollouts: () => getRollouts,
    streams: () => streams,
    rolloutId,
    attemptId,
    baseUrl: `${url}/rollout/${rolloutId}/attempt/${attemptId}/v1`,
  };
}

describe.each([false, true])("the standalone proxy's span promises (stream: %s)", (stream) => {
  const body = { model: "fake-model", messages: [{ role: "user", content: "hi" }], stream };

  it("refuses calls of an unknown rollout or attempt from the store's description, without GetRollout", async () => {
    const { getRollouts, rolloutId, attemptId, baseUrl } = await startCounted("reads expect");
    const proxyUrl = baseUrl.slice(0, baseUrl.indexOf("/rollout/"));
    const call = (path: string) => postJson(`${proxyUrl}${path}/v1/chat/completions`, body);
    const noRollout = await call(`/rollout/ro-000000000000/attempt/${attemptId}`);
    expect([noRollout.status, (await noRollout.json()).error.code]).toEqual([404, "rollout_not_found"]);
    const noAttempt = await call(`/rollout/${rolloutId}/attempt/at-ffffffff`);
    expect([noAttempt.status, (await noAttempt.json()).error.code]).toEqual([404, "attempt_not_found"]);
    expect(engine.requests).toHaveLength(0);
    expect(getRollouts()).toBe(0);
    // An id the store refuses outright (too long): the question fails alone, and GetRollout says it does not exist.
    const tooLong = await call(`/rollout/ro-${"f".repeat(300)}/attempt/${attemptId}`);
    expect([tooLong.status, (await tooLong.json()).error.code]).toEqual([404, "rollout_not_found"]);
    expect(getRollouts()).toBe(1);
  });

  it.each(["reads expect", "predates holds", "predates expect", "holds no promises"] as const)(
    "a store that %s: about one store call per LLM call where it can, and the attempt waits for its spans",
    async (kind) => {
      const { addSpans, expectSpans, getRollouts, streams, rolloutId, attemptId, baseUrl } = await startCounted(kind);
      const calls = 4;
      for (let i = 0; i < calls; i++) {
        const res = await postJson(`${baseUrl}/chat/completions`, body);
        expect(await res.text()).toContain(stream ? "data: [DONE]" : "chat.completion");
      }
      // The span batches went as messages on one AddSpansStream, or as AddSpans calls where the store has no stream.
      expect(streams()).toBe(kind === "predates expect" ? 0 : 1);
      // The first call asked about its attempt with a batch (describe_attempt, and its span's promise) before it was
      // served: a store that answers needs no GetRollout; one that predates the field is then asked with GetRollout.
      const describe = { spans: 0, promises: 1 };
      expect(addSpans[0]).toEqual(describe);
      expect(getRollouts()).toBe(kind === "predates expect" ? 1 : 0);
      addSpans.shift();
      const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
      if (kind === "holds no promises") {
        // Refused once (with the batch, then alone): from then on each span is stored before its answer ends.
        expect(addSpans).toEqual([{ spans: 0, promises: 1 }, ...Array.from({ length: calls }, () => ({ spans: 1, promises: 0 }))]);
        expect(expectSpans()).toBe(1);
        expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
        expect((await store.querySpans({ rolloutId })).spans).toHaveLength(calls);
        return;
      }
      if (kind === "reads expect") {
        // The first call's promise went with the attempt's description; the second took a hold of the attempt,
        // riding with the first's span; the later calls answered on the hold with no message of their own, their
        // spans waiting for a batch.
        expect(addSpans).toEqual([{ spans: 1, promises: 1 }]);
        // The attempt's end asked for the hold back: the spans went in one batch, then the release.
        expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
        expect(addSpans).toEqual([
          { spans: 1, promises: 1 },
          { spans: calls - 1, promises: 0 },
          { spans: 0, promises: 1 },
        ]);
        expect(expectSpans()).toBe(0);
        expect((await store.querySpans({ rolloutId })).spans).toHaveLength(calls);
        return;
      }
      if (kind === "predates holds") {
        // The second call's hold was taken as a promise, and withdrawn; that call's promise then went alone (its
        // batch had gone), and each later one rode on the batch of the call before.
        expect(addSpans).toEqual([
          { spans: 1, promises: 1 },
          { spans: 0, promises: 1 },
          { spans: 1, promises: 1 },
          { spans: 1, promises: 1 },
        ]);
        expect(expectSpans()).toBe(1);
        // The last span still waits for a batch: the attempt's end waits for it, not for the withdrawn hold.
        expect(await settledWithin(finished, 100)).toBe(false);
        await proxy.close(); // sends what waits
        expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
        expect((await store.querySpans({ rolloutId })).spans).toHaveLength(calls);
        return;
      }
      // The first promise was not read with the batch, so it went alone, and every later one too.
      expect(addSpans.slice(0, 1)).toEqual([{ spans: 0, promises: 1 }]);
      expect(addSpans.slice(1).every((call) => call.promises === 0)).toBe(true);
      expect(expectSpans()).toBe(calls);
      // The last span still waits for a batch: the attempt's end waits for it.
      expect(await settledWithin(finished, 100)).toBe(false);
      await proxy.close(); // sends what waits
      expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
      expect((await store.querySpans({ rolloutId })).spans).toHaveLength(calls);
    },
  );
});
