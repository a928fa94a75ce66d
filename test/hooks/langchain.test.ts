/** The LangChain.js callback handler with real @langchain/core and @langchain/openai against the loopback engine. */
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { registerLangChainTracing } from "../../src/tracer/hooks/langchain.js";
import { createTracingFetch } from "../../src/tracer/hooks/openai-fetch.js";
import { runAttempt } from "../support/attempt-harness.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { attrs, bySource, calculatorPolicy } from "./hook-helpers.js";

let engine: FakeLlmServer;
let model: ChatOpenAI;
const add = tool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
  name: "add",
  description: "Adds two numbers.",
  schema: z.object({ a: z.number(), b: z.number() }),
});
beforeAll(async () => {
  engine = await startFakeLlmServer({ policy: calculatorPolicy });
  registerLangChainTracing();
  model = new ChatOpenAI({
    model: engine.model,
    apiKey: "test",
    configuration: { baseURL: engine.url, fetch: createTracingFetch() },
    modelKwargs: { return_token_ids: true },
  });
});
afterAll(() => engine.close());

describe("LangChain.js callback handler", () => {
  it("records chat model calls and tools with no per-call callbacks, token ids joined from the fetch wrapper", async () => {
    const before = engine.answers.length;
    const { spans } = await runAttempt(async () => {
      const message = await model.bindTools([add]).invoke("What is 2+3?");
      const call = message.tool_calls?.[0];
      expect(call).toMatchObject({ name: "add", args: { a: 2, b: 3 } });
      const result = await add.invoke(call as never);
      expect((result as { content: string }).content).toBe("5");
    });
    const [answer] = engine.answers.slice(before);
    const [chat] = bySource(spans, "langchain");
    expect(chat?.name).toBe(`chat ${engine.model}`);
    expect(attrs(chat)).toMatchObject({
      "langchain.run_type": "chat_model",
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": engine.model,
      "gen_ai.response.id": answer?.responseId,
      "gen_ai.response.finish_reasons": ["tool_calls"],
      "gen_ai.usage.input_tokens": answer?.promptIds.length,
      "agl.llm.prompt_token_ids": answer?.promptIds,
      "agl.llm.response_token_ids": answer?.responseIds,
    });
    expect(JSON.parse(String(attrs(chat)["gen_ai.input.messages"]))).toEqual([{ role: "user", content: "What is 2+3?" }]);
    expect(JSON.parse(String(attrs(chat)["gen_ai.output.messages"]))[0].tool_calls[0].function.name).toBe("add");
    expect(attrs(spans.find((s) => s.name === "execute_tool add"))).toMatchObject({
      "gen_ai.tool.name": "add",
      "gen_ai.tool.call.result": "5",
    });
  });

  it("records a streamed chat model call", async () => {
    const before = engine.answers.length;
    const { spans } = await runAttempt(async () => {
      let text = "";
      for await (const chunk of await model.stream("Say five.")) text += chunk.content;
      expect(text).toBe("five");
    });
    const [answer] = engine.answers.slice(before);
    expect(answer?.stream).toBe(true);
    expect(attrs(bySource(spans, "langchain")[0])).toMatchObject({
      "agl.llm.response_token_ids": answer?.responseIds,
      "gen_ai.response.id": answer?.responseId,
    });
  });
});
