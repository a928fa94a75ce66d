/**
 * An agent's LLM calls recorded by `createTracingFetch` (no proxy), run by a real runner on real piscina workers
 * against a store server and a loopback vLLM-style engine: every span is stored before the attempt's final status,
 * and streamed calls read to `[DONE]` are recorded as OK with their token ids.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { RolloutStatus, type Span, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner, type RunnerOptions } from "../../src/runner/runner.js";
import { attrs } from "../hooks/hook-helpers.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";
import { type ChatterTask, chatter } from "../fixtures/llm-agents.js";

const agentModule = new URL("../fixtures/llm-agents.ts", import.meta.url).pathname;
let h: StoreHarness;
let engine: FakeVllm;
const cleanups: (() => Promise<void>)[] = [];
beforeEach(async () => {
  h = await startStoreHarness();
  engine = await startFakeVllm({ tokensPerChunk: 2 });
  await h.client.addResources({
    resources: {
      engine: {
        kind: {
          case: "llm",
          value: { endpoint: engine.url, model: engine.model, samplingParameters: { return_token_ids: true, logprobs: true } },
        },
      },
    },
  });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
  await engine.close();
  await h.close();
});

function startRunner(options: Partial<RunnerOptions> = {}, where: "worker threads" | "the main thread" = "worker threads") {
  const executor =
    where === "worker threads"
      ? createPoolExecutor({ agentModule, exportName: "chatter", workers: 1, concurrency: 8, logger: silentLogger })
      : createInProcessExecutor({ agent: chatter, concurrency: 8, logger: silentLogger });
  const runner = createRunner({ store: h.client, executor, pollWaitSeconds: 0.3, logger: silentLogger, ...options });
  const running = runner.run();
  cleanups.push(async () => {
    await runner.stop({ graceMs: 0 });
    await running;
    await executor.close();
  });
}

async function runTasks(tasks: ChatterTask[]) {
  const { rollouts } = await h.client.enqueueRollouts({ rollouts: tasks.map((t) => ({ input: jsonValue(t as never) })) });
  const ids = rollouts.map((r) => r.rolloutId);
  const finished = await waitFinished(h.client, ids, 30);
  expect(finished.map((r) => r.status)).toEqual(ids.map(() => RolloutStatus.SUCCEEDED));
  // Read at once, as a trainer does the moment a rollout finishes.
  return Promise.all(ids.map(async (rolloutId) => (await h.client.querySpans({ rolloutId })).spans));
}

const llmSpans = (spans: Span[]) => spans.filter((s) => s.name.startsWith("chat ")).sort((a, b) => a.sequenceId - b.sequenceId);

describe("LLM spans recorded by createTracingFetch, through the runner pool", () => {
  it.each(["worker threads", "the main thread"] as const)(
    "stores every span of an attempt before its final status, even spans still waiting in the shipper (on %s)",
    async (where) => {
      // Spans leave the agent's thread at once but linger in the shipper: an attempt that ends meanwhile has never
      // sent a batch of its own, and its queued spans must ride on its final update, not follow it.
      startRunner({ spanFlushMs: 10, shipper: { lingerMs: 3_000 } }, where);
      const perRollout = await runTasks(Array.from({ length: 4 }, () => ({ calls: 3, pauseMs: 60 })));
      for (const spans of perRollout) {
        const calls = llmSpans(spans);
        expect(calls).toHaveLength(3);
        // In call order: the store's sequence ids follow arrival.
        expect(calls.map((s) => JSON.parse(String(attrs(s)["gen_ai.input.messages"]))[0].content)).toEqual(["turn 0", "turn 1", "turn 2"]);
      }
    },
  );

  it("records a streamed call the client read to [DONE] as OK, with the engine's token ids", async () => {
    startRunner();
    const before = engine.answers.length;
    const [spans] = await runTasks([{ calls: 2, stream: true }]);
    const calls = llmSpans(spans!);
    expect(calls).toHaveLength(2);
    const answers = engine.answers.slice(before);
    expect(answers.every((a) => a.stream)).toBe(true);
    calls.forEach((span, i) => {
      expect(span.status?.code).not.toBe(StatusCode.ERROR);
      expect(span.status?.description ?? "").toBe("");
      expect(attrs(span)["agl.llm.prompt_token_ids"]).toEqual(answers[i]!.promptIds);
      expect(attrs(span)["agl.llm.response_token_ids"]).toEqual(answers[i]!.responseIds);
    });
  });
});
