/**
 * `resources.llm()` with no name, as agents meet it: the trainer's snapshot (`main_llm` → the LLM proxy, `policy` →
 * the engine), a real runner on piscina workers, a store server that serves the proxy, and a loopback vLLM-style
 * engine. The default is the attempt-bound proxy, so the proxy records the calls; an ambiguous snapshot fails the
 * attempt with an error that names the choices.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner, type Runner } from "../../src/runner/runner.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { attrs } from "../hooks/hook-helpers.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { jsonValue, waitFinished } from "../support/store-harness.js";

let store: Store;
let proxy: LlmProxy;
let server: StoreServer;
let engine: FakeVllm;
let client: StoreClient;
let executor: AttemptExecutor;
let runner: Runner;
let running: Promise<unknown>;

beforeAll(async () => {
  engine = await startFakeVllm();
  store = createStore({ backend: createMemoryBackend() });
  proxy = createLlmProxy({ store, pendingWrites: store.pendingWrites, logger: silentLogger });
  server = await startStoreServer({ store, port: 0, fallback: (req, res) => proxy.handle(req, res) });
  client = createStoreClient({ baseUrl: server.url });
  executor = createPoolExecutor({
    agentModule: new URL("../fixtures/llm-agents.ts", import.meta.url).pathname,
    exportName: "chatter",
    workers: 1,
    concurrency: 4,
    logger: silentLogger,
  });
  runner = createRunner({ store: client, executor, pollWaitSeconds: 0.3, logger: silentLogger });
  running = runner.run();
});
afterAll(async () => {
  await runner?.stop({ graceMs: 0 });
  await running;
  await executor?.close();
  client?.close();
  await server?.close();
  await proxy?.close();
  await store?.close();
  await engine?.close();
});

async function runOne(resourcesId: string) {
  const { rollouts } = await client.enqueueRollouts({ rollouts: [{ input: jsonValue({ calls: 1 }), resourcesId }] });
  const [finished] = await waitFinished(client, [rollouts[0]!.rolloutId], 30);
  return finished!;
}

describe("resources.llm() with no name", () => {
  it("is the attempt-bound proxy in the trainer's snapshot, so the proxy records the call with its token ids", async () => {
    const { resourcesId } = await client.addResources({
      resources: {
        // The engine first: a default by position would pick it.
        policy: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
        main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${server.url}/v1`, model: engine.model } } },
      },
    });
    const rollout = await runOne(resourcesId);
    expect(rollout.status).toBe(RolloutStatus.SUCCEEDED);
    const { spans } = await client.querySpans({ rolloutId: rollout.rolloutId });
    const fromProxy = spans.filter((s) => attrs(s)["agl.llm.source"] === "proxy");
    expect(fromProxy).toHaveLength(1);
    expect(attrs(fromProxy[0])["agl.llm.response_token_ids"]).toEqual(engine.answers.at(-1)!.responseIds);
  });

  it("fails the attempt with an error naming the choices when no LLM is the default", async () => {
    const { resourcesId } = await client.addResources({
      resources: {
        small: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
        large: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
      },
    });
    const rollout = await runOne(resourcesId);
    expect(rollout.status).toBe(RolloutStatus.FAILED);
    const message = String((rollout.latestAttempt?.metadata?.error as { message?: string } | undefined)?.message);
    expect(message).toMatch(/several LLMs/);
    expect(message).toContain('"small"');
    expect(message).toContain('"large"');
    expect(message).toContain('resources.llm("…")');
  });
});
