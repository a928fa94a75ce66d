/** A memory store, a fake vLLM engine and an LLM proxy in front of it, for the proxy and end-to-end suites. */
import { silentLogger } from "../../src/core/logger.js";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createLlmProxy, type LlmProxy, type LlmProxyOptions } from "../../src/proxy/llm-proxy.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { type FakeVllm, type FakeVllmOptions, startFakeVllm } from "./fake-vllm.js";

export interface ProxyHarness {
  store: Store;
  engine: FakeVllm;
  proxy: LlmProxy;
  /** `http://127.0.0.1:PORT` of the proxy. */
  url: string;
  /** A dequeued rollout's ids and its attempt-scoped base URL (`…/rollout/R/attempt/A/v1`). */
  claim(input?: unknown): Promise<{ rolloutId: string; attemptId: string; baseUrl: string }>;
  close(): Promise<void>;
}

export interface ProxyHarnessOptions {
  engine?: FakeVllmOptions;
  proxy?: Partial<LlmProxyOptions>;
  /** Publish the engine as an `llm` resource and let the proxy follow the store (default: pass it as a fixed backend). */
  viaResources?: boolean;
}

export async function startProxyHarness(options: ProxyHarnessOptions = {}): Promise<ProxyHarness> {
  const store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  const engine = await startFakeVllm(options.engine);
  if (options.viaResources) {
    await store.addResources({ resources: { engine: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } } } });
  }
  const proxy = createLlmProxy({
    store,
    // In the store's process, as `agl serve --proxy` runs it: span reads right after an answer see its span.
    pendingWrites: store.pendingWrites,
    ...(options.viaResources ? {} : { backends: [{ endpoint: engine.url, model: engine.model }] }),
    backoffBaseMs: 5,
    logger: silentLogger,
    ...options.proxy,
  });
  const url = await proxy.listen(0);
  await proxy.ready;
  return {
    store,
    engine,
    proxy,
    url,
    async claim(input = null) {
      await store.enqueueRollouts({ rollouts: [{ input: fromJson(ValueSchema, input as JsonValue) }] });
      const { rollouts } = await store.dequeueRollouts({ workerId: "test-worker" });
      const rollout = rollouts[0];
      if (!rollout?.latestAttempt) throw new Error("nothing to claim");
      const rolloutId = rollout.rolloutId;
      const attemptId = rollout.latestAttempt.attemptId;
      return { rolloutId, attemptId, baseUrl: `${url}/rollout/${rolloutId}/attempt/${attemptId}/v1` };
    },
    async close() {
      await proxy.close();
      await engine.close();
      await store.close();
    },
  };
}

/** POSTs JSON. */
export function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
