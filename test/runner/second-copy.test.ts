/**
 * An agent that imports another copy of agl than the runner's (a linked checkout: the CLI runs `src/`, the agent
 * imports `dist/`) still runs inside the runner's attempt: its fetch wrapper records its LLM call and its emitters
 * report, on worker threads and on the main thread, against a real store server and a loopback vLLM-style engine.
 *
 * The second copy is `src/` copied under test-artifacts/ (inside the repository, so that it resolves the same
 * node_modules) and loaded by path: modules of their own, state of their own.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { currentAttempt } from "../../src/tracer/attempt-scope.js";
import type { Agent } from "../../src/agent/agent.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner } from "../../src/runner/runner.js";
import { attrs } from "../hooks/hook-helpers.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";

const repo = new URL("../../", import.meta.url).pathname;
let dir: string;
let agentModule: string;
let h: StoreHarness;
let engine: FakeVllm;

beforeAll(async () => {
  mkdirSync(join(repo, "test-artifacts"), { recursive: true });
  dir = mkdtempSync(join(repo, "test-artifacts", "agl-second-copy-"));
  cpSync(join(repo, "src"), join(dir, "src"), { recursive: true, filter: (path) => !path.endsWith(".test.ts") });
  agentModule = join(dir, "agent.ts");
  writeFileSync(
    agentModule,
    `import OpenAI from "openai";
import { createTracingFetch, emitMessage, rollout } from "./src/index.ts";
import { currentAttempt } from "./src/tracer/attempt-scope.ts";

/** This copy's own function, for the test to tell the copies apart. */
export { currentAttempt };

export default rollout(async (_task, resources) => {
  const llm = resources.llm();
  const client = new OpenAI({ baseURL: llm.endpoint, apiKey: "none", fetch: createTracingFetch(), maxRetries: 0 });
  const answer = await client.chat.completions.create({ model: llm.model, messages: [{ role: "user", content: "hi" }], ...llm.samplingParameters });
  emitMessage(\`answered: \${answer.choices[0]?.message?.content ?? ""}\`);
  return 1;
});
`,
  );
  h = await startStoreHarness();
  engine = await startFakeVllm();
  await h.client.addResources({
    resources: {
      engine: {
        kind: { case: "llm", value: { endpoint: engine.url, model: engine.model, samplingParameters: { return_token_ids: true } } },
      },
    },
  });
}, 60_000);

afterAll(async () => {
  await engine?.close();
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function runOne(executor: AttemptExecutor) {
  const runner = createRunner({ store: h.client, executor, pollWaitSeconds: 0.3, logger: silentLogger });
  const running = runner.run();
  try {
    const { rollouts } = await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({}) }] });
    const rolloutId = rollouts[0]!.rolloutId;
    const [finished] = await waitFinished(h.client, [rolloutId], 60);
    return { finished: finished!, spans: (await h.client.querySpans({ rolloutId })).spans };
  } finally {
    await runner.stop({ graceMs: 0 });
    await running;
    await executor.close();
  }
}

describe("an agent importing a second copy of agl", () => {
  it("is a second copy: its modules are not the runner's", async () => {
    const copy = await import(agentModule);
    expect(copy.currentAttempt).toBeTypeOf("function");
    expect(copy.currentAttempt).not.toBe(currentAttempt);
  });

  it.each(["worker threads", "the main thread"] as const)(
    "records its LLM call and its message (on %s)",
    async (where) => {
      const executor =
        where === "worker threads"
          ? createPoolExecutor({ agentModule, workers: 1, concurrency: 1, logger: silentLogger })
          : createInProcessExecutor({ agent: (await import(agentModule)).default as Agent<unknown>, concurrency: 1, logger: silentLogger });
      const { finished, spans } = await runOne(executor);
      expect(finished.status).toBe(RolloutStatus.SUCCEEDED);
      const call = spans.find((s) => s.name.startsWith("chat "));
      expect(call, `spans: ${spans.map((s) => s.name).join(", ")}`).toBeDefined();
      expect(attrs(call!)["agl.llm.response_token_ids"]).toEqual(engine.answers.at(-1)?.responseIds);
      const message = spans.find((s) => attrs(s)["agentlightning.message.body"] !== undefined);
      expect(String(attrs(message!)["agentlightning.message.body"])).toMatch(/^answered: /);
    },
    60_000,
  );
});
