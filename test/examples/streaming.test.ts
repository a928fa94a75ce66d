/**
 * examples/streaming run as users run it (Trainer.dev, the agent on a worker thread) against a loopback vLLM-style
 * engine: through the LLM proxy (the trainer's snapshot, `main_llm` → the proxy) and through `createTracingFetch` alone.
 * Every streamed call is recorded, as OK, with the exact token ids the engine sent.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type BaselineOptions, createBaseline } from "../../src/algorithm/baseline.js";
import { silentLogger } from "../../src/core/logger.js";
import { StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { createLlmProxy, type LlmProxy } from "../../src/proxy/llm-proxy.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { Trainer } from "../../src/trainer/trainer.js";
import { tasks } from "../../examples/calculator/tasks.js";
import { attrs, bySource } from "../hooks/hook-helpers.js";
import { type FakeLlmServer, type PolicyInput, startFakeLlmServer } from "../support/fake-llm-server.js";

/** A model that answers "What is A op B?" with the number. */
function arithmetic(input: PolicyInput) {
  const user = [...input.messages].reverse().find((m) => m.role === "user");
  const match = /(-?\d+)\s*([-+*/])\s*(-?\d+)/.exec(typeof user?.content === "string" ? user.content : "");
  if (!match) return { content: "I cannot tell." };
  const [a, op, b] = [Number(match[1]), match[2], Number(match[3])];
  return { content: `The answer is ${op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : a / b}.` };
}

const agent = new URL("../../examples/streaming/agent.ts", import.meta.url);
let engine: FakeLlmServer;
let store: Store;
let proxy: LlmProxy;
let proxyUrl: string;
beforeAll(async () => {
  engine = await startFakeLlmServer({ policy: arithmetic, tokensPerChunk: 2 });
});
afterAll(() => engine.close());

async function runExample(resources: NonNullable<BaselineOptions["resources"]>) {
  const before = engine.answers.length;
  const report = await Trainer.dev(agent, tasks as never, { store, logger: silentLogger, algorithm: createBaseline({ resources }) });
  expect(report.rollouts.map((r) => [r.status, r.reward])).toEqual(tasks.map(() => ["succeeded", 1]));
  const answers = engine.answers.slice(before);
  expect(answers).toHaveLength(tasks.length);
  expect(answers.every((a) => a.stream)).toBe(true);
  const spans = (await Promise.all(report.rollouts.map(async (r) => (await store.querySpans({ rolloutId: r.rolloutId })).spans))).flat();
  return { answers, spans };
}

const idsOf = (span: Parameters<typeof attrs>[0]) => JSON.stringify(attrs(span)["agl.llm.response_token_ids"]);

describe("examples/streaming", () => {
  // A store (Trainer.dev closes it when done) and the proxy that records into it, for each run.
  beforeEach(async () => {
    store = createStore({ backend: createMemoryBackend() });
    proxy = createLlmProxy({ store, pendingWrites: store.pendingWrites, logger: silentLogger });
    proxyUrl = await proxy.listen(0);
  });
  afterEach(async () => {
    await proxy.close();
    await store.close();
  });

  it("through createTracingFetch: each streamed call is one OK span with the engine's token ids", async () => {
    const { answers, spans } = await runExample({
      main: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model, samplingParameters: { return_token_ids: true } } } },
    });
    const recorded = bySource(spans, "openai-fetch");
    expect(recorded).toHaveLength(tasks.length);
    for (const span of recorded) expect(span.status?.code).not.toBe(StatusCode.ERROR);
    expect(recorded.map(idsOf).sort()).toEqual(answers.map((a) => JSON.stringify(a.responseIds)).sort());
  });

  it("through the LLM proxy of a trainer's snapshot: the proxy records each streamed call with the engine's token ids", async () => {
    const { answers, spans } = await runExample({
      policy: { kind: { case: "llm", value: { endpoint: engine.url, model: engine.model } } },
      main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${proxyUrl}/v1`, model: engine.model } } },
    });
    const fromProxy = bySource(spans, "proxy");
    expect(fromProxy).toHaveLength(tasks.length);
    expect(fromProxy.map(idsOf).sort()).toEqual(answers.map((a) => JSON.stringify(a.responseIds)).sort());
    expect(fromProxy.map((s) => JSON.stringify(attrs(s)["agl.llm.prompt_token_ids"])).sort()).toEqual(
      answers.map((a) => JSON.stringify(a.promptIds)).sort(),
    );
    // The fetch wrapper in the agent saw the same streams and recorded them as OK too.
    const fromFetch = bySource(spans, "openai-fetch");
    expect(fromFetch).toHaveLength(tasks.length);
    for (const span of fromFetch) expect(span.status?.code).not.toBe(StatusCode.ERROR);
  });
});
