/**
 * `agl serve --proxy` in this process, for end-to-end suites: a memory store, its server (TripletService included)
 * with the LLM proxy on the same port, and the fake vLLM engine, published as what a trainer publishes: the engine
 * (`engine`, an `llm` resource) and the proxy the agents must use (`main_llm`, a `proxy_llm` resource).
 */
import { silentLogger } from "../../src/core/logger.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { createTripletClient, type TripletClient } from "../../src/triplets/triplet-client.js";
import { type FakeVllm, type FakeVllmOptions, startFakeVllm } from "./fake-vllm.js";

export interface ServedProxy {
  store: Store;
  proxy: LlmProxy;
  server: StoreServer;
  engine: FakeVllm;
  client: StoreClient;
  triplets: TripletClient;
  close(): Promise<void>;
}

export async function startServedProxy(options: { engine?: FakeVllmOptions; tripletPollMs?: number } = {}): Promise<ServedProxy> {
  const engine = await startFakeVllm(options.engine);
  const store = createStore({ backend: createMemoryBackend() });
  // As `agl serve --proxy` runs it: answers first, the store orders each span before the attempt's finishing update.
  const proxy = createLlmProxy({ store, pendingWrites: store.pendingWrites, logger: silentLogger });
  const server = await startStoreServer({
    store,
    port: 0,
    ...(options.tripletPollMs ? { triplets: { pollIntervalMs: options.tripletPollMs } } : {}),
    fallback: (req, res) => proxy.handle(req, res),
  });
  const client = createStoreClient({ baseUrl: server.url });
  const triplets = createTripletClient({ baseUrl: server.url });
  await client.addResources({
    resources: {
      engine: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
      main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${server.url}/v1`, model: engine.model } } },
    },
  });
  return {
    store,
    proxy,
    server,
    engine,
    client,
    triplets,
    async close() {
      triplets.close();
      client.close();
      await server.close();
      await proxy.close();
      await store.close();
      await engine.close();
    },
  };
}
