/** The Vercel AI SDK (ai@6) telemetry integration with the real SDK against the loopback engine. */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { registerAiSdkTracing } from "../../src/tracer/hooks/ai-sdk.js";
import { createTracingFetch } from "../../src/tracer/hooks/openai-fetch.js";
import { runAttempt } from "../support/attempt-harness.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { attrs, bySource, calculatorPolicy } from "./hook-helpers.js";

let engine: FakeLlmServer;
let provider: ReturnType<typeof createOpenAICompatible>;
const add = tool({
  description: "Adds two numbers.",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b,
});
beforeAll(async () => {
  engine = await startFakeLlmServer({ policy: calculatorPolicy });
  await registerAiSdkTracing();
  provider = createOpenAICompatible({
    name: "loopback",
    baseURL: engine.url,
    apiKey: "test",
    fetch: createTracingFetch(),
    transformRequestBody: (body) => ({ ...body, return_token_ids: true }),
  });
});
afterAll(() => engine.close());

describe("Vercel AI SDK telemetry integration", () => {
  it("records generateText as a call span with one chat span per step (token ids from the raw body) and the tool", async () => {
    const before = engine.answers.length;
    const { spans } = await runAttempt(async () => {
      const result = await generateText({
        model: provider(engine.model),
        prompt: "What is 2+3?",
        tools: { add },
        stopWhen: stepCountIs(3),
        experimental_telemetry: { functionId: "calculator" },
      });
      expect(result.text).toBe("The answer is 5.");
    });
    const answers = engine.answers.slice(before);
    const call = spans.find((s) => s.name === "ai.generate calculator");
    expect(attrs(call)).toMatchObject({ "gen_ai.agent.name": "calculator", "ai.model.id": engine.model });
    const steps = bySource(spans, "vercel-ai");
    expect(steps).toHaveLength(2);
    steps.forEach((step, i) => {
      expect(step.parentId).toBe(call?.spanId);
      expect(attrs(step)).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": engine.model,
        "gen_ai.response.id": answers[i]?.responseId,
        "agl.llm.prompt_token_ids": answers[i]?.promptIds,
        "agl.llm.response_token_ids": answers[i]?.responseIds,
        "gen_ai.usage.output_tokens": answers[i]?.responseIds.length,
      });
    });
    expect(attrs(steps[0])["gen_ai.response.finish_reasons"]).toEqual(["tool_calls"]);
    const toolSpan = spans.find((s) => s.name === "execute_tool add");
    expect(toolSpan?.parentId).toBe(call?.spanId);
    expect(attrs(toolSpan)).toMatchObject({ "gen_ai.tool.name": "add", "gen_ai.tool.call.result": "5" });
  });

  it("records streamText, taking token ids from the fetch wrapper's capture of the same calls", async () => {
    const before = engine.answers.length;
    const { spans } = await runAttempt(async () => {
      const result = streamText({ model: provider(engine.model), prompt: "What is 2+3?", tools: { add }, stopWhen: stepCountIs(3) });
      let text = "";
      for await (const part of result.textStream) text += part;
      expect(text).toBe("The answer is 5.");
    });
    const answers = engine.answers.slice(before);
    expect(answers.every((a) => a.stream)).toBe(true);
    const steps = bySource(spans, "vercel-ai");
    expect(steps.map((s) => attrs(s)["agl.llm.response_token_ids"])).toEqual(answers.map((a) => a.responseIds));
    expect(steps.map((s) => attrs(s)["gen_ai.response.id"])).toEqual(answers.map((a) => a.responseId));
    expect(spans.find((s) => s.name === "ai.generate")).toBeDefined();
  });
});
