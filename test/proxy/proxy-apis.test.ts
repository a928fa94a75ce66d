/** The Responses and Messages APIs through the proxy, with the real openai and @anthropic-ai/sdk clients. */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { attrInts, attrJson, attrString } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { renderChat } from "../support/fake-tokenizer.js";
import { type ProxyHarness, postJson, startProxyHarness } from "../support/proxy-harness.js";

let h: ProxyHarness;
afterEach(() => h?.close());

const weatherPolicy = {
  policy: (input: { tools: unknown[]; messages: { role: string; content?: unknown }[] }) =>
    input.tools.length > 0 && input.messages.at(-1)?.role === "user"
      ? { content: "Let me look.", toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] }
      : { content: `Sunny: ${String(input.messages.at(-1)?.content)}` },
};

async function spansOf(rolloutId: string) {
  return (await h.store.querySpans({ rolloutId })).spans;
}

describe("/v1/responses", () => {
  for (const stream of [false, true]) {
    it(`serves a tool call and its follow-up as Responses output items (${stream ? "streamed" : "whole"})`, async () => {
      h = await startProxyHarness({ engine: weatherPolicy });
      const { rolloutId, baseUrl } = await h.claim();
      const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
      const tools: OpenAI.Responses.Tool[] = [
        {
          type: "function",
          name: "lookup",
          description: "Weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
          strict: false,
        },
      ];
      const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "Weather in Paris?" }];
      const call = async () => {
        if (!stream) return client.responses.create({ model: h.engine.model, instructions: "Be brief.", input, tools });
        const events = await client.responses.create({ model: h.engine.model, instructions: "Be brief.", input, tools, stream: true });
        let done: OpenAI.Responses.Response | undefined;
        const types: string[] = [];
        for await (const e of events) {
          types.push(e.type);
          if (e.type === "response.completed") done = e.response;
        }
        expect(types[0]).toBe("response.created");
        expect(types.at(-1)).toBe("response.completed");
        expect(types.includes("response.function_call_arguments.delta")).toBe(input.length === 1);
        return done as OpenAI.Responses.Response;
      };
      const first = await call();
      expect(first.status).toBe("completed");
      expect(first.output.map((o) => o.type)).toEqual(["message", "function_call"]);
      const fc = first.output[1] as OpenAI.Responses.ResponseFunctionToolCall;
      expect([fc.name, JSON.parse(fc.arguments)]).toEqual(["lookup", { city: "Paris" }]);
      input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]), {
        type: "function_call_output",
        call_id: fc.call_id,
        output: "24°C",
      });
      const second = await call();
      expect(second.output).toEqual([
        expect.objectContaining({ type: "message", content: [expect.objectContaining({ text: "Sunny: 24°C" })] }),
      ]);
      expect(second.usage?.output_tokens).toBe(h.engine.answers[1]?.responseIds.length);
      const spans = await spansOf(rolloutId);
      expect(spans).toHaveLength(2);
      spans.forEach((span, i) => {
        expect(attrString(span.attributes, sc.AGL_LLM_API)).toBe("responses");
        expect(attrInts(span.attributes, sc.AGL_LLM_PROMPT_TOKEN_IDS)).toEqual(h.engine.answers[i]?.promptIds);
        expect(attrInts(span.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(h.engine.answers[i]?.responseIds);
      });
      // The second call's chat request is the whole conversation: system, user, assistant with its call, the tool result.
      const chat = attrJson(spans[1]!.attributes, sc.AGL_LLM_REQUEST) as { messages: { role: string }[] };
      expect(chat.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
    });
  }

  it("resolves previous_response_id to the conversation it answered", async () => {
    h = await startProxyHarness({ engine: weatherPolicy });
    const { baseUrl } = await h.claim();
    const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
    const first = await client.responses.create({ model: h.engine.model, input: "hello" });
    const second = await client.responses.create({ model: h.engine.model, input: "again", previous_response_id: first.id });
    expect(second.output_text).toBe("Sunny: again");
    expect(h.engine.requests[1]?.body.messages.map((m: { content: string }) => m.content)).toEqual(["hello", first.output_text, "again"]);
    const bad = await postJson(`${baseUrl}/responses`, { model: h.engine.model, input: "x", previous_response_id: "resp_nope" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("previous_response_id");
  });

  it("refuses what it cannot serve with a 400 naming the field", async () => {
    h = await startProxyHarness();
    for (const [body, param] of [
      [{ model: h.engine.model, input: "x", tools: [{ type: "web_search" }] }, "tools[0].type"],
      [{ model: h.engine.model, input: [{ type: "reasoning", summary: [] }] }, "input[0].type"],
      [
        { model: h.engine.model, input: [{ role: "user", content: [{ type: "input_image", image_url: "u" }] }] },
        "input[0].content[0].type",
      ],
      [{ model: h.engine.model, input: "x", background: true }, "background"],
    ] as const) {
      const res = await postJson(`${h.url}/v1/responses`, body);
      expect(res.status).toBe(400);
      const err = ((await res.json()) as { error: { param: string; message: string } }).error;
      expect(err.param).toBe(param);
    }
    expect(h.engine.requests).toHaveLength(0);
  });
});

describe("/v1/messages", () => {
  for (const stream of [false, true]) {
    it(`serves tool_use and tool_result turns as Messages content blocks (${stream ? "streamed" : "whole"})`, async () => {
      h = await startProxyHarness({ engine: weatherPolicy });
      const { rolloutId, baseUrl } = await h.claim();
      const client = new Anthropic({ baseURL: baseUrl.replace(/\/v1$/, ""), apiKey: "k" });
      const tools: Anthropic.Tool[] = [
        { name: "lookup", description: "Weather", input_schema: { type: "object", properties: { city: { type: "string" } } } },
      ];
      const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Weather in Paris?" }];
      const call = async () => {
        const params = { model: h.engine.model, max_tokens: 200, system: "Be brief.", messages, tools };
        if (!stream) return client.messages.create(params);
        return client.messages.stream(params).finalMessage();
      };
      const first = await call();
      expect(first.stop_reason).toBe("tool_use");
      expect(first.content.map((b) => b.type)).toEqual(["text", "tool_use"]);
      const use = first.content[1] as Anthropic.ToolUseBlock;
      expect([use.name, use.input]).toEqual(["lookup", { city: "Paris" }]);
      messages.push(
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "24°C" }] },
      );
      const second = await call();
      expect(second.stop_reason).toBe("end_turn");
      expect(second.content).toEqual([expect.objectContaining({ type: "text", text: "Sunny: 24°C" })]);
      expect(second.usage.output_tokens).toBe(h.engine.answers[1]?.responseIds.length);
      const spans = await spansOf(rolloutId);
      expect(spans).toHaveLength(2);
      spans.forEach((span, i) => {
        expect(attrString(span.attributes, sc.AGL_LLM_API)).toBe("messages");
        expect(attrInts(span.attributes, sc.AGL_LLM_PROMPT_TOKEN_IDS)).toEqual(h.engine.answers[i]?.promptIds);
        expect(attrInts(span.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(h.engine.answers[i]?.responseIds);
      });
    });
  }

  for (const stream of [false, true]) {
    it(`maps a matched stop sequence to stop_reason stop_sequence (${stream ? "streamed" : "whole"})`, async () => {
      h = await startProxyHarness({ engine: { policy: () => ({ content: "one, two, STOP, three" }) } });
      const client = new Anthropic({ baseURL: h.url, apiKey: "k" });
      const params = {
        model: h.engine.model,
        max_tokens: 50,
        stop_sequences: ["STOP"],
        messages: [{ role: "user" as const, content: "count" }],
      };
      const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
      expect([message.stop_reason, message.stop_sequence, message.content]).toEqual([
        "stop_sequence",
        "STOP",
        [expect.objectContaining({ type: "text", text: "one, two, " })],
      ]);
      expect(h.engine.requests[0]?.body.stop).toEqual(["STOP"]);
    });
  }

  it("counts tokens with the engine's chat template (/v1/messages/count_tokens), 501 without /tokenize", async () => {
    h = await startProxyHarness();
    const client = new Anthropic({ baseURL: h.url, apiKey: "k", maxRetries: 0 });
    const tools: Anthropic.Tool[] = [{ name: "lookup", description: "Weather", input_schema: { type: "object" } }];
    const params = { model: h.engine.model, system: "Be brief.", messages: [{ role: "user" as const, content: "hi" }], tools };
    const { input_tokens } = await client.messages.countTokens(params);
    const chatTools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" }, description: "Weather" } }];
    const expected = renderChat(
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
      chatTools,
    );
    expect(input_tokens).toBe(expected.length);
    expect(h.engine.answers).toHaveLength(0);
    h.engine.setOptions({ tokenize: false });
    const err = await client.messages.countTokens(params).catch((e: unknown) => e);
    expect((err as { status?: number }).status).toBe(501);
  });

  it("answers errors in the Anthropic shape", async () => {
    h = await startProxyHarness();
    const res = await postJson(`${h.url}/v1/messages`, {
      model: h.engine.model,
      max_tokens: 5,
      messages: [{ role: "user", content: [{ type: "image", source: {} }] }],
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("image") },
    });
  });

  it("refuses a missing max_tokens, a bad token and an engine error, each in the Anthropic shape", async () => {
    h = await startProxyHarness({ proxy: { token: "secret" } });
    const auth = { authorization: "Bearer secret" };
    const noMax = await postJson(`${h.url}/v1/messages`, { model: h.engine.model, messages: [{ role: "user", content: "x" }] }, auth);
    expect([noMax.status, ((await noMax.json()) as { error: { message: string } }).error.message]).toEqual([
      400,
      expect.stringContaining("max_tokens"),
    ]);
    const client = new Anthropic({ baseURL: h.url, apiKey: "wrong", maxRetries: 0 });
    const params = { model: h.engine.model, max_tokens: 5, messages: [{ role: "user" as const, content: "x" }] };
    await expect(client.messages.create(params)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    h.engine.fault({ type: "status", status: 400, body: JSON.stringify({ error: { message: "prompt too long" } }) });
    // The key an Anthropic client sends (`x-api-key`) is the proxy's token.
    const good = new Anthropic({ baseURL: h.url, apiKey: "secret", maxRetries: 0 });
    const err = await good.messages.create(params).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("prompt too long") },
    });
  });
});

describe("a stream that breaks", () => {
  for (const api of ["responses", "messages"] as const) {
    it(`ends the ${api} stream with the API's error event and records the call as failed`, async () => {
      h = await startProxyHarness({ engine: { tokensPerChunk: 1 } });
      const { rolloutId, baseUrl } = await h.claim();
      h.engine.fault({ type: "break", afterChunks: 3 });
      const body =
        api === "responses"
          ? { model: h.engine.model, input: "hello there", stream: true }
          : { model: h.engine.model, max_tokens: 50, messages: [{ role: "user", content: "hello there" }], stream: true };
      const res = await postJson(`${baseUrl}/${api}`, body);
      const events = (await res.text()).split("\n\n").filter((e) => e.trim() !== "");
      const last = events.at(-1) as string;
      expect(last).toMatch(/^event: error\n/);
      expect(events.some((e) => e.startsWith(api === "responses" ? "event: response.completed" : "event: message_stop"))).toBe(false);
      const [span] = await spansOf(rolloutId);
      expect(attrString(span!.attributes, sc.ERROR_TYPE)).toBe("upstream_error");
    });
  }
});
