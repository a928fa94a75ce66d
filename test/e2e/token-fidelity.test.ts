/**
 * Agent → proxy → engine → spans → triplets, end to end on one port (store, TripletService and proxy, as
 * `agl serve --proxy` runs them): every id in every triplet equals what the engine sent, streamed or not, with tool
 * calls; a 3-turn tool-using rollout merges into one trajectory with the right masks; a broken prefix does not.
 */
import { silentLogger } from "../../src/core/logger.js";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { type RolloutTriplets, TripletMode } from "../../src/gen/agl/v1/triplets_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { createTripletClient, type TripletClient } from "../../src/triplets/triplet-client.js";
import { type Answer, type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { addingPolicy, type AgentTask, runAgents } from "../support/mini-agent.js";

let store: Store;
let proxy: LlmProxy;
let server: StoreServer;
let engine: FakeVllm;
let client: StoreClient;
let triplets: TripletClient;
let byRollout: Map<string, { task: AgentTask; transition: RolloutTriplets; trajectory: RolloutTriplets }>;

const tasks: AgentTask[] = [
  ...Array.from({ length: 6 }, (_, i) => ({ question: `add ${i}`, stream: i % 2 === 0 })),
  { question: "broken, streamed", stream: true, breakPrefix: true },
  { question: "broken, whole", stream: false, breakPrefix: true },
];

async function collect(mode: TripletMode): Promise<RolloutTriplets[]> {
  const out: RolloutTriplets[] = [];
  for await (const m of triplets.streamTriplets({ follow: true, options: { mode } }, { timeoutMs: 30_000 })) {
    if (m.rollout) out.push(m.rollout);
    if (out.length === tasks.length) break;
  }
  return out;
}

beforeAll(async () => {
  engine = await startFakeVllm({ policy: addingPolicy, tokensPerChunk: 4 });
  store = createStore({ backend: createMemoryBackend() });
  proxy = createLlmProxy({ store, pendingWrites: store.pendingWrites, logger: silentLogger });
  server = await startStoreServer({ store, port: 0, triplets: { pollIntervalMs: 50 }, fallback: (req, res) => proxy.handle(req, res) });
  client = createStoreClient({ baseUrl: server.url });
  triplets = createTripletClient({ baseUrl: server.url });
  // What a trainer publishes: the engine, and the proxy the agents must use.
  await client.addResources({
    resources: {
      engine: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
      main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${server.url}/v1`, model: engine.model } } },
    },
  });
  // The trainer streams (following) while the agents run.
  const transition = collect(TripletMode.TRANSITION);
  await client.enqueueRollouts({ rollouts: tasks.map((t) => ({ input: fromJson(ValueSchema, t as unknown as JsonValue) })) });
  await runAgents(client, tasks.length, 3);
  const trajectory = await collect(TripletMode.TRAJECTORY);
  const taskOf = new Map(
    (await client.queryRollouts({})).rollouts.map((r) => [r.rolloutId, toJson(ValueSchema, r.input as never) as unknown as AgentTask]),
  );
  byRollout = new Map();
  for (const t of await transition) {
    byRollout.set(t.rolloutId, {
      task: taskOf.get(t.rolloutId) as AgentTask,
      transition: t,
      trajectory: trajectory.find((x) => x.rolloutId === t.rolloutId) as RolloutTriplets,
    });
  }
}, 60_000);

afterAll(async () => {
  triplets?.close();
  client?.close();
  await server?.close();
  await proxy?.close();
  await store?.close();
  await engine?.close();
});

describe("token fidelity, end to end", () => {
  it("every call of every rollout became a triplet whose ids and logprobs equal exactly what the engine sent", () => {
    const answers = new Map<string, Answer>(engine.answers.map((a) => [a.responseId, a]));
    const all = [...byRollout.values()].flatMap((r) => r.transition.triplets);
    expect(engine.answers).toHaveLength(tasks.length * 3);
    expect(all).toHaveLength(engine.answers.length);
    expect(new Set(all.map((t) => t.responseId)).size).toBe(all.length);
    for (const t of all) {
      const sent = answers.get(t.responseId) as Answer;
      expect(t.promptTokenIds).toEqual(sent.promptIds);
      expect(t.responseTokenIds).toEqual(sent.responseIds);
      expect(t.logprobs).toEqual(sent.logprobs);
      expect(t.responseMask.every((m) => m === 1)).toBe(true);
    }
    // Both ways of calling were exercised, and tool calls happened in both.
    expect(new Set(engine.answers.map((a) => a.stream))).toEqual(new Set([true, false]));
    expect(engine.answers.filter((a) => a.toolCalls.length > 0).map((a) => a.stream)).toContain(true);
    expect(engine.answers.filter((a) => a.toolCalls.length > 0).map((a) => a.stream)).toContain(false);
  });

  it("a clean 3-turn tool-using rollout is one trajectory: model tokens mask 1, observations mask 0 with logprob 0", () => {
    const clean = [...byRollout.values()].filter((r) => !r.task.breakPrefix);
    expect(clean).toHaveLength(6);
    const answers = new Map<string, Answer>(engine.answers.map((a) => [a.responseId, a]));
    for (const { transition, trajectory } of clean) {
      expect(trajectory.triplets).toHaveLength(1);
      expect(trajectory.stats?.mismatches).toEqual({});
      const [t] = trajectory.triplets;
      const turns = transition.triplets.map((x) => answers.get(x.responseId) as Answer);
      const ids: number[] = [...turns[0]!.responseIds];
      const mask: number[] = turns[0]!.responseIds.map(() => 1);
      const logprobs: number[] = [...turns[0]!.logprobs];
      for (let k = 1; k < turns.length; k++) {
        const observation = turns[k]!.promptIds.slice(turns[0]!.promptIds.length + ids.length);
        ids.push(...observation, ...turns[k]!.responseIds);
        mask.push(...observation.map(() => 0), ...turns[k]!.responseIds.map(() => 1));
        logprobs.push(...observation.map(() => 0), ...turns[k]!.logprobs);
      }
      expect(t).toMatchObject({
        turnIndex: 0,
        turnCount: 3,
        promptTokenIds: turns[0]!.promptIds,
        responseTokenIds: ids,
        responseMask: mask,
        logprobs,
        reward: 1,
        finalReward: 1,
      });
      expect(mask.filter((m) => m === 0).length).toBeGreaterThan(10);
    }
  });

  it("a rollout whose agent rewrote its history yields separate samples and a counted mismatch", () => {
    const broken = [...byRollout.values()].filter((r) => r.task.breakPrefix);
    expect(broken).toHaveLength(2);
    for (const { trajectory } of broken) {
      expect(trajectory.triplets.map((t) => [t.turnIndex, t.turnCount])).toEqual([
        [0, 1],
        [1, 2],
      ]);
      expect(trajectory.stats?.mismatches).toEqual({ prompt_changed: 1 });
    }
  });
});
