/** The examples, run as users run them (Trainer.dev, agent on a worker thread) against the loopback engine. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBaseline } from "../../src/algorithm/baseline.js";
import { silentLogger } from "../../src/core/logger.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore } from "../../src/store/store.js";
import { Trainer } from "../../src/trainer/trainer.js";
import { tasks } from "../../examples/calculator/tasks.js";
import { calculatorPolicy } from "../support/calculator-policy.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { attrs } from "../hooks/hook-helpers.js";

let engine: FakeLlmServer;
beforeAll(async () => {
  engine = await startFakeLlmServer({ policy: calculatorPolicy });
});
afterAll(() => engine.close());

for (const example of ["calculator", "ai-sdk"]) {
  describe(`examples/${example}`, () => {
    it("solves the tasks with a tool call and records its LLM calls with token ids", async () => {
      const store = createStore({ backend: createMemoryBackend() });
      const before = engine.answers.length;
      const report = await Trainer.dev(new URL(`../../examples/${example}/agent.ts`, import.meta.url), tasks as never, {
        store,
        logger: silentLogger,
        algorithm: createBaseline({
          resources: {
            main: {
              kind: { case: "llm", value: { endpoint: engine.url, model: engine.model, samplingParameters: { return_token_ids: true } } },
            },
          },
        }),
      });
      expect(report.rollouts.map((r) => [r.status, r.reward])).toEqual(tasks.map(() => ["succeeded", 1]));
      expect(report.meanReward.train).toBe(1);
      // Two LLM calls per task (tool call, then answer), each recorded with the engine's exact ids.
      const answers = engine.answers.slice(before);
      expect(answers).toHaveLength(2 * tasks.length);
      const { spans } = await store.querySpans({ rolloutId: report.rollouts[0]!.rolloutId });
      const llmSpans = spans.filter((s) => attrs(s)["agl.llm.response_token_ids"] !== undefined);
      expect(llmSpans.length).toBeGreaterThanOrEqual(2);
      const recorded = llmSpans.map((s) => JSON.stringify(attrs(s)["agl.llm.response_token_ids"]));
      expect(answers.some((a) => recorded.includes(JSON.stringify(a.responseIds)))).toBe(true);
      await store.close();
    });
  });
}
