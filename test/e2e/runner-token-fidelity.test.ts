/**
 * The same token-fidelity checks through the real runner (src/runner, in-process executor) instead of the test's
 * minimal loop: the runner resolves the `proxy_llm` resource to the attempt's proxy URL, the agent calls the model
 * through it, the runner reports the reward and the outcome, and the triplets carry exactly the engine's ids.
 */
import { silentLogger } from "../../src/core/logger.js";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rollout } from "../../src/agent/agent.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { type RolloutTriplets, TripletMode } from "../../src/gen/agl/v1/triplets_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createRunner } from "../../src/runner/runner.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { createTripletClient, type TripletClient } from "../../src/triplets/triplet-client.js";
import { type Answer, type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { addingAgent, addingPolicy, type AgentTask } from "../support/mini-agent.js";

let store: Store;
let proxy: LlmProxy;
let server: StoreServer;
let engine: FakeVllm;
let client: StoreClient;
let triplets: TripletClient;

const tasks: AgentTask[] = [
  { question: "runner 1", stream: false },
  { question: "runner 2", stream: true },
  { question: "runner 3", stream: true, breakPrefix: true },
];

beforeAll(async () => {
  engine = await startFakeVllm({ policy: addingPolicy });
  store = createStore({ backend: createMemoryBackend() });
  // As `agl serve --proxy` runs it: answers first, the store orders each span before the attempt's finishing update.
  proxy = createLlmProxy({ store, pendingWrites: store.pendingWrites, logger: silentLogger });
  server = await startStoreServer({ store, port: 0, fallback: (req, res) => proxy.handle(req, res) });
  client = createStoreClient({ baseUrl: server.url });
  triplets = createTripletClient({ baseUrl: server.url });
  await client.addResources({
    resources: {
      engine: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
      main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${server.url}/v1`, model: engine.model } } },
    },
  });
  await client.enqueueRollouts({ rollouts: tasks.map((t) => ({ input: fromJson(ValueSchema, t as unknown as JsonValue) })) });
  const agent = rollout<AgentTask>(async (task, resources) => {
    const llm = resources.llm("main_llm");
    return addingAgent(llm.endpoint, llm.model, task);
  });
  const runner = createRunner({
    store: client,
    executor: createInProcessExecutor({ agent, concurrency: 3 }),
    maxRollouts: tasks.length,
    pollWaitSeconds: 1,
  });
  await runner.run();
}, 60_000);

afterAll(async () => {
  triplets?.close();
  client?.close();
  await server?.close();
  await proxy?.close();
  await store?.close();
  await engine?.close();
});

async function read(mode: TripletMode): Promise<Map<string, RolloutTriplets>> {
  const out = new Map<string, RolloutTriplets>();
  for await (const m of triplets.streamTriplets({ options: { mode } })) if (m.rollout) out.set(m.rollout.rolloutId, m.rollout);
  return out;
}

describe("token fidelity through the real runner", () => {
  it("turns every call into triplets with the engine's exact ids, merges clean trajectories, splits the broken one", async () => {
    const transition = await read(TripletMode.TRANSITION);
    const trajectory = await read(TripletMode.TRAJECTORY);
    expect(transition.size).toBe(tasks.length);
    const answers = new Map<string, Answer>(engine.answers.map((a) => [a.responseId, a]));
    const all = [...transition.values()].flatMap((r) => r.triplets);
    expect(all).toHaveLength(engine.answers.length);
    expect(engine.answers).toHaveLength(9);
    for (const t of all) {
      const sent = answers.get(t.responseId) as Answer;
      expect([t.promptTokenIds, t.responseTokenIds, t.logprobs]).toEqual([sent.promptIds, sent.responseIds, sent.logprobs]);
    }
    const shapes = [...trajectory.values()].map((r) => r.triplets.map((t) => t.turnCount)).sort();
    expect(shapes).toEqual([[1, 2], [3], [3]]);
    for (const r of transition.values()) expect(r.finalReward).toBe(1);
  });
});
