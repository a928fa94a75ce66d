/** The OpenAI Agents JS trace processor with the real SDK (chat completions) against the loopback engine. */
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, tool } from "@openai/agents";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createTracingFetch } from "../../src/tracer/hooks/openai-fetch.js";
import { registerOpenAIAgentsTracing } from "../../src/tracer/hooks/openai-agents.js";
import { runAttempt } from "../support/attempt-harness.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { ancestors, attrs, bySource, calculatorPolicy } from "./hook-helpers.js";

let engine: FakeLlmServer;
let agent: Agent;
beforeAll(async () => {
  engine = await startFakeLlmServer({ policy: calculatorPolicy });
  await registerOpenAIAgentsTracing();
  setOpenAIAPI("chat_completions");
  setDefaultOpenAIClient(new OpenAI({ baseURL: engine.url, apiKey: "test", fetch: createTracingFetch() }) as never);
  const add = tool({
    name: "add",
    description: "Adds two numbers.",
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => String(a + b),
  });
  agent = new Agent({
    name: "calculator",
    instructions: "Use add.",
    model: engine.model,
    tools: [add],
    modelSettings: { providerData: { return_token_ids: true } },
  });
});
afterAll(() => engine.close());

describe("OpenAI Agents JS trace processor", () => {
  for (const stream of [false, true]) {
    it(`records the agent, its model calls with token ids, and its tool (${stream ? "streaming" : "not streaming"})`, async () => {
      const before = engine.answers.length;
      let output: unknown;
      const { spans, outcome } = await runAttempt(async () => {
        const result = stream ? await run(agent, "What is 2+3?", { stream: true }) : await run(agent, "What is 2+3?");
        if (stream) await (result as { completed: Promise<void> }).completed;
        output = result.finalOutput;
      });
      expect(outcome.end).toBe("succeeded");
      expect(output).toBe("The answer is 5.");
      const answers = engine.answers.slice(before);
      expect(answers).toHaveLength(2);
      const agentSpan = spans.find((s) => s.name === "invoke_agent calculator");
      expect(attrs(agentSpan)).toMatchObject({ "gen_ai.agent.name": "calculator", "openai.agents.span_type": "agent" });
      const generations = bySource(spans, "openai-agents");
      expect(generations.map((s) => s.name)).toEqual([`chat ${engine.model}`, `chat ${engine.model}`]);
      generations.forEach((span, i) => {
        expect(attrs(span)).toMatchObject({
          "openai.agents.span_type": "generation",
          "gen_ai.operation.name": "chat",
          "gen_ai.response.id": answers[i]?.responseId,
          "agl.llm.prompt_token_ids": answers[i]?.promptIds,
          "agl.llm.response_token_ids": answers[i]?.responseIds,
        });
        expect(ancestors(spans, span)).toContain(agentSpan);
      });
      const toolSpan = spans.find((s) => s.name === "execute_tool add");
      expect(attrs(toolSpan)).toMatchObject({ "gen_ai.tool.name": "add", "gen_ai.tool.call.result": "5" });
      expect(ancestors(spans, toolSpan)).toContain(agentSpan);
      // The same calls seen by the fetch wrapper share their response ids (adapters count each call once).
      expect(bySource(spans, "openai-fetch").map((s) => attrs(s)["gen_ai.response.id"])).toEqual(answers.map((a) => a.responseId));
    });
  }
});
