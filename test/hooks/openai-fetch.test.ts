/** The fetch wrapper with the real openai client against the loopback OpenAI-compatible engine. */
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { createTracingFetch } from "../../src/tracer/hooks/openai-fetch.js";
import { runAttempt } from "../support/attempt-harness.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { attrs, bySource, calculatorPolicy } from "./hook-helpers.js";

let engine: FakeLlmServer;
let client: OpenAI;
beforeEach(async () => {
  engine = await startFakeLlmServer({ policy: calculatorPolicy });
  client = new OpenAI({ baseURL: engine.url, apiKey: "test", fetch: createTracingFetch(), maxRetries: 0 });
});
afterEach(() => engine.close());

const tools = [
  {
    type: "function" as const,
    function: { name: "add", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } },
  },
];
const withIds = { return_token_ids: true, logprobs: true } as Record<string, unknown>;

describe("openai fetch wrapper", () => {
  it("records a tool-calling chat completion with the exact token ids and logprobs the engine returned", async () => {
    const { spans } = await runAttempt(async () => {
      const response = await client.chat.completions.create({
        model: engine.model,
        messages: [{ role: "user", content: "2+3?" }],
        tools,
        ...withIds,
      });
      expect(response.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: "add", arguments: '{"a":2,"b":3}' } });
    });
    const [span] = bySource(spans, "openai-fetch");
    const a = attrs(span);
    const [answer] = engine.answers;
    expect(span?.name).toBe(`chat ${engine.model}`);
    expect(a).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": engine.model,
      "gen_ai.response.id": answer?.responseId,
      "gen_ai.response.finish_reasons": ["tool_calls"],
      "gen_ai.usage.input_tokens": answer?.promptIds.length,
      "gen_ai.usage.output_tokens": answer?.responseIds.length,
      "agl.llm.stream": false,
      "agl.llm.http_status": 200,
      "agl.llm.prompt_token_ids": answer?.promptIds,
      "agl.llm.response_token_ids": answer?.responseIds,
    });
    expect(a["agl.llm.logprobs"]).toEqual(answer?.logprobs);
    expect(JSON.parse(String(a["gen_ai.input.messages"]))).toEqual([{ role: "user", content: "2+3?" }]);
    expect(JSON.parse(String(a["gen_ai.tool.definitions"]))).toEqual(tools);
    expect(JSON.parse(String(a["gen_ai.output.messages"]))[0].tool_calls[0].function.name).toBe("add");
    expect(JSON.parse(String(a["agl.llm.request"]))).toMatchObject({ model: engine.model, return_token_ids: true });
    expect(JSON.parse(String(a["agl.llm.response"])).prompt_token_ids).toEqual(answer?.promptIds);
    expect(span?.parentId).toBe(spans.find((s) => s.name === "agentlightning.rollout")?.spanId);
  });

  it("passes a stream through untouched and records the completion assembled from its chunks", async () => {
    let text = "";
    const { spans } = await runAttempt(async () => {
      const stream = await client.chat.completions.create({
        model: engine.model,
        messages: [{ role: "user", content: "hello" }],
        stream: true,
        stream_options: { include_usage: true },
        ...withIds,
      } as OpenAI.ChatCompletionCreateParamsStreaming);
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    });
    expect(text).toBe("five");
    const a = attrs(bySource(spans, "openai-fetch")[0]);
    const [answer] = engine.answers;
    expect(answer?.stream).toBe(true);
    expect(a["agl.llm.stream"]).toBe(true);
    expect(a["agl.llm.prompt_token_ids"]).toEqual(answer?.promptIds);
    expect(a["agl.llm.response_token_ids"]).toEqual(answer?.responseIds);
    expect(a["agl.llm.logprobs"]).toEqual(answer?.logprobs);
    expect(a["gen_ai.response.id"]).toBe(answer?.responseId);
    expect(a["gen_ai.usage.output_tokens"]).toBe(answer?.responseIds.length);
    expect(JSON.parse(String(a["gen_ai.output.messages"]))).toEqual([{ role: "assistant", content: "five", finish_reason: "stop" }]);
    expect(a["agl.llm.time_to_first_byte_ms"]).toBeLessThanOrEqual(a["agl.llm.latency_ms"] as number);
  });

  it("records completions calls, per-choice prompt ids included", async () => {
    const { spans } = await runAttempt(async () => {
      await client.completions.create({ model: engine.model, prompt: "2+3=", max_tokens: 3, ...withIds, logprobs: 1 } as never);
    });
    const span = bySource(spans, "openai-fetch")[0];
    const [answer] = engine.answers;
    expect(span?.name).toBe(`text_completion ${engine.model}`);
    expect(attrs(span)).toMatchObject({
      "gen_ai.operation.name": "text_completion",
      "gen_ai.request.max_tokens": 3,
      "agl.llm.prompt_token_ids": answer?.promptIds,
      "agl.llm.response_token_ids": answer?.responseIds,
      "gen_ai.response.finish_reasons": ["length"],
    });
    expect(attrs(span)["agl.llm.logprobs"]).toEqual(answer?.logprobs);
  });

  it("marks failed calls and broken streams as errors, and stays out of the way outside a rollout", async () => {
    engine.fault({ type: "status", status: 503 }, { type: "break", afterChunks: 2 });
    const { spans } = await runAttempt(async () => {
      await expect(client.chat.completions.create({ model: engine.model, messages: [{ role: "user", content: "x" }] })).rejects.toThrow(
        /503/,
      );
      const stream = await client.chat.completions.create({
        model: engine.model,
        messages: [{ role: "user", content: "x" }],
        stream: true,
      });
      await expect(
        (async () => {
          for await (const _ of stream) {
          }
        })(),
      ).rejects.toThrow();
    });
    const [failed, broken] = bySource(spans, "openai-fetch");
    expect(failed?.status?.code).toBe(StatusCode.ERROR);
    expect(attrs(failed)["agl.llm.http_status"]).toBe(503);
    expect(broken?.status).toMatchObject({ code: StatusCode.ERROR, description: expect.stringMatching(/the stream broke/) });
    // No rollout, no span: the call simply goes through.
    const plain = await client.chat.completions.create({ model: engine.model, messages: [{ role: "user", content: "x" }] });
    expect(plain.choices[0]?.message.content).toBe("five");
  });
});
