/**
 * When a call's span lands relative to the end of its answer. The guarantee either way: once an agent got its answer,
 * its runner cannot finish the attempt (nor anyone read the attempt's spans) without that call's span.
 */
import { afterEach, describe, expect, it } from "vitest";
import { AttemptStatus, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { createStore, type Store } from "../../src/store/store.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { postJson } from "../support/proxy-harness.js";

let store: Store;
let engine: FakeVllm;
let proxy: LlmProxy;
afterEach(async () => {
  await proxy?.close();
  await engine?.close();
  await store?.close();
});

/** A store whose span writes wait until `open()`: the store is slow, or far away. */
function slowSpanWrites(inner: Store) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let stored = 0;
  const slow: StoreApi = {
    ...inner,
    async addSpans(request, options) {
      await gate;
      const response = await inner.addSpans(request, options);
      stored++;
      return response;
    },
  };
  return { slow, open, stored: () => stored };
}

const settledWithin = <T>(promise: Promise<T>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms))]);

async function start(inProcess: boolean) {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  engine = await startFakeVllm();
  const writes = slowSpanWrites(store);
  proxy = createLlmProxy({
    store: writes.slow,
    ...(inProcess ? { pendingWrites: store.pendingWrites } : {}),
    backends: [{ endpoint: engine.url, model: engine.model }],
    log: () => {},
  });
  const url = await proxy.listen(0);
  await store.enqueueRollouts({ rollouts: [{}] });
  const [rollout] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
  const rolloutId = rollout!.rolloutId;
  const attemptId = rollout!.latestAttempt!.attemptId;
  return { ...writes, rolloutId, attemptId, baseUrl: `${url}/rollout/${rolloutId}/attempt/${attemptId}/v1` };
}

describe.each([false, true])("span ordering (stream: %s)", (stream) => {
  const body = { model: "fake-model", messages: [{ role: "user", content: "hi" }], stream };

  it("with the store in process: answers first, and the attempt's finishing update and span reads wait for the span", async () => {
    const { open, stored, rolloutId, attemptId, baseUrl } = await start(true);
    const res = await postJson(`${baseUrl}/chat/completions`, body);
    const text = await res.text();
    expect(text).toContain(stream ? "data: [DONE]" : "chat.completion");
    expect(stored()).toBe(0);

    // What a runner does once its agent returned: report the attempt finished.
    const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED });
    const read = store.querySpans({ rolloutId });
    expect(await settledWithin(finished, 100)).toBe(false);
    expect((await store.getRollout({ rolloutId })).latestAttempt?.status).not.toBe(AttemptStatus.SUCCEEDED);

    open();
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    expect(stored()).toBe(1);
    const { spans } = await read;
    expect(spans).toHaveLength(1);
    expect(spans[0]?.status?.code).toBe(StatusCode.OK);
    expect(res.headers.get("x-agl-span-id")).toBe(spans[0]?.spanId);
  });

  it("with the store elsewhere: stores the span before the end of the answer reaches the client", async () => {
    const { open, stored, rolloutId, baseUrl } = await start(false);
    const answer = postJson(`${baseUrl}/chat/completions`, body).then((res) => res.text());
    expect(await settledWithin(answer, 100)).toBe(false);
    open();
    expect(await answer).toContain(stream ? "data: [DONE]" : "chat.completion");
    expect(stored()).toBe(1);
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(1);
  });
});
