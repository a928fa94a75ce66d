/**
 * Capture without the proxy's store: `createTracingFetch` and the framework hooks record Responses and Messages calls
 * (whole and streamed) with the same attributes as chat calls. The real SDKs call the LLM proxy (unscoped, so the proxy
 * stores nothing) in front of the loopback engine; its answers carry the engine's ids under `agl`.
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { Agent, run, setDefaultOpenAIClient, tool as agentTool } from "@openai/agents";
import { generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { conversationOf } from "../../src/adapter/chat-messages.js";
import { createAgentStreamAssembler } from "../../src/tracer/hooks/agent-api-wire.js";
import { registerAiSdkTracing } from "../../src/tracer/hooks/ai-sdk.js";
import { createTracingFetch } from "../../src/tracer/hooks/openai-fetch.js";
import { registerOpenAIAgentsTracing } from "../../src/tracer/hooks/openai-agents.js";
import { runAttempt } from "../support/attempt-harness.js";
import { type ProxyHarness, startProxyHarness } from "../support/proxy-harness.js";
import { ancestors, attrs, bySource, calculatorPolicy } from "./hook-helpers.js";

let h: ProxyHarness;
let base: string;
beforeAll(async () => {
  h = await startProxyHarness({ engine: { policy: calculatorPolicy } });
  base = `${h.url}/v1`;
  await registerOpenAIAgentsTracing();
  await registerAiSdkTracing();
});
afterAll(() => h.close());

const addSchema = z.object({ a: z.number(), b: z.number() });
const idsOf = (i: number) => ({
  "agl.llm.prompt_token_ids": h.engine.answers[i]?.promptIds,
  "agl.llm.response_token_ids": h.engine.answers[i]?.responseIds,
  "agl.llm.logprobs": h.engine.answers[i]?.logprobs,
});

describe("createTracingFetch on the Responses and Messages APIs", () => {
  for (const stream of [false, true]) {
    it(`records openai responses.create and Anthropic messages.create as chat calls (${stream ? "streamed" : "whole"})`, async () => {
      const before = h.engine.answers.length;
      const { spans } = await runAttempt(async () => {
        const openai = new OpenAI({ baseURL: base, apiKey: "k", fetch: createTracingFetch() });
        const anthropic = new Anthropic({ baseURL: h.url, apiKey: "k", fetch: createTracingFetch() });
        if (stream) {
          for await (const _ of await openai.responses.create({ model: h.engine.model, input: "hi", stream: true })) {
            // read it all
          }
          await anthropic.messages
            .stream({ model: h.engine.model, max_tokens: 64, messages: [{ role: "user", content: "hi" }] })
            .finalMessage();
        } else {
          await openai.responses.create({ model: h.engine.model, instructions: "Be kind.", input: "hi" });
          await anthropic.messages.create({
            model: h.engine.model,
            max_tokens: 64,
            system: "Be kind.",
            messages: [{ role: "user", content: "hi" }],
          });
        }
      });
      const calls = bySource(spans, "openai-fetch");
      expect(calls.map((s) => attrs(s)["agl.llm.api"])).toEqual(["responses", "messages"]);
      calls.forEach((span, i) => {
        expect(attrs(span)).toMatchObject({
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": i === 0 ? "openai" : "anthropic",
          "gen_ai.response.finish_reasons": ["stop"],
          "gen_ai.usage.output_tokens": h.engine.answers[before + i]?.responseIds.length,
          ...idsOf(before + i),
        });
        // Adapters read them as the chat calls they map to.
        const { messages } = conversationOf(span);
        expect(messages.map((m) => m.role)).toEqual(stream ? ["user", "assistant"] : ["system", "user", "assistant"]);
        expect(messages.at(-1)?.content).toBe("five");
      });
    });
  }
});

describe("framework hooks on the Responses and Messages APIs", () => {
  it("OpenAI Agents JS on its default Responses API: response spans with the fetch capture's ids", async () => {
    setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: "k", fetch: createTracingFetch() }) as never);
    const add = agentTool({ name: "add", description: "Adds.", parameters: addSchema, execute: async ({ a, b }) => String(a + b) });
    const agent = new Agent({ name: "calculator", instructions: "Use add.", model: h.engine.model, tools: [add] });
    const before = h.engine.answers.length;
    const { spans } = await runAttempt(async () => {
      const result = await run(agent, "What is 2+3?");
      expect(result.finalOutput).toBe("The answer is 5.");
    });
    const generations = bySource(spans, "openai-agents");
    expect(generations).toHaveLength(2);
    const agentSpan = spans.find((s) => s.name === "invoke_agent calculator");
    generations.forEach((span, i) => {
      expect(span.name).toBe(`chat ${h.engine.model}`);
      expect(attrs(span)).toMatchObject({
        "openai.agents.span_type": "response",
        "gen_ai.response.id": `resp_${h.engine.answers[before + i]?.responseId}`,
        ...idsOf(before + i),
      });
      expect(ancestors(spans, span)).toContain(agentSpan);
    });
  });

  for (const [name, model] of [
    ["openai() (Responses)", () => createOpenAI({ baseURL: base, apiKey: "k", fetch: createTracingFetch() })(h.engine.model)],
    ["anthropic() (Messages)", () => createAnthropic({ baseURL: base, apiKey: "k", fetch: createTracingFetch() })(h.engine.model)],
  ] as const) {
    for (const stream of [false, true]) {
      it(`AI SDK ${name}: one step span per call with ids (${stream ? "streamText" : "generateText"})`, async () => {
        const before = h.engine.answers.length;
        const { spans } = await runAttempt(async () => {
          const args = {
            model: model(),
            prompt: "What is 2+3?",
            tools: { add: tool({ inputSchema: addSchema, execute: async ({ a, b }: { a: number; b: number }) => a + b }) },
            stopWhen: stepCountIs(3),
          };
          const text = stream ? await streamText(args).text : (await generateText(args)).text;
          expect(text).toBe("The answer is 5.");
        });
        const steps = bySource(spans, "vercel-ai");
        expect(steps).toHaveLength(2);
        expect(steps.map((step) => attrs(step))).toEqual(
          [0, 1].map((i) => expect.objectContaining({ "gen_ai.operation.name": "chat", ...idsOf(before + i) })),
        );
      });
    }
  }
});

describe("the Messages stream's assembled answer", () => {
  it("keeps a delta's key named __proto__ as data, not as the answer's prototype", () => {
    const assembler = createAgentStreamAssembler("messages");
    for (const event of [
      '{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}',
      '{"type":"message_delta","delta":{"stop_reason":"end_turn","__proto__":{"stop_sequence":"x"}}}',
      '{"type":"message_stop"}',
    ]) {
      assembler.add(JSON.parse(event));
    }
    const body = assembler.result();
    expect(Object.getPrototypeOf(body)).toBe(Object.prototype);
    expect(Object.keys(body)).toContain("__proto__");
    expect(body.stop_sequence).toBeUndefined();
    expect([body.stop_reason, assembler.complete()]).toEqual(["end_turn", true]);
  });
});
