/**
 * Token-in mode against a loopback engine whose tokenizer merges " x" into one token while its model samples some
 * answers unmerged: chat mode re-renders those answers differently and the trajectory splits; token-in sends each
 * next prompt as ids that extend the previous call's exactly, for chat, Responses and Messages, whole and streamed.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { attrString } from "../../src/adapter/attributes.js";
import { spansToTriplets } from "../../src/adapter/spans-to-triplets.js";
import * as sc from "../../src/core/semconv.js";
import { decode } from "../support/fake-tokenizer.js";
import type { PolicyInput, Reply } from "../support/fake-vllm.js";
import { type ProxyHarness, startProxyHarness } from "../support/proxy-harness.js";

let h: ProxyHarness;
afterEach(() => h?.close());

/** Looks up two cities, then answers with the tools' results; every answer has " x" pairs the tokenizer merges. */
function weatherPolicy(input: PolicyInput): Reply {
  const results = input.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
  if (results.length === 0) return { content: "Let me look it up.", toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] };
  if (results.length === 1) return { content: "And Lyon too.", toolCalls: [{ name: "lookup", arguments: { city: "Lyon" } }] };
  return { content: `It is ${results.join(" and ")} today.` };
}
const answer = "It is 24°C and sunny and 24°C and sunny today.";
const engine = { policy: weatherPolicy, merges: true, reencodeShare: 1 };
const chatTools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];

/** A two-turn chat agent (tool call, tool result, answer) on the openai client. */
async function chatAgent(baseUrl: string, stream: boolean, model: string): Promise<string> {
  const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Weather in Paris?" },
  ];
  for (;;) {
    let message: OpenAI.ChatCompletionMessage;
    if (stream) {
      const runner = client.chat.completions.stream({ model, messages, tools: chatTools });
      message = (await runner.finalChatCompletion()).choices[0]!.message;
    } else {
      message = (await client.chat.completions.create({ model, messages, tools: chatTools })).choices[0]!.message;
    }
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? "";
    for (const call of message.tool_calls) messages.push({ role: "tool", tool_call_id: call.id, content: "24°C and sunny" });
  }
}

async function trajectoriesOf(rolloutId: string) {
  const { spans } = await h.store.querySpans({ rolloutId });
  return { spans, adapted: spansToTriplets(spans, { mode: "trajectory" }) };
}

describe("token-in mode", () => {
  it("chat mode splits when an answer re-encodes differently; token-in extends the ids and merges", async () => {
    for (const tokenIn of [false, true]) {
      h = await startProxyHarness({ engine, proxy: { tokenIn } });
      const { rolloutId, baseUrl } = await h.claim();
      expect(await chatAgent(baseUrl, false, h.engine.model)).toBe(answer);
      const [first, second] = h.engine.answers;
      const context = [...first!.promptIds, ...first!.responseIds];
      // The same text either way; only the ids differ.
      expect(decode(second!.promptIds).startsWith(decode(context))).toBe(true);
      expect(JSON.stringify(second!.promptIds.slice(0, context.length)) === JSON.stringify(context)).toBe(tokenIn);
      const { spans, adapted } = await trajectoriesOf(rolloutId);
      expect(spans.map((s) => attrString(s.attributes, sc.AGL_LLM_TOKEN_IN))).toEqual(
        tokenIn ? ["first", "extended", "extended"] : [undefined, undefined, undefined],
      );
      expect(adapted.triplets.map((t) => t.turnCount)).toEqual(tokenIn ? [3] : [1, 1, 1]);
      const chat = "/v1/chat/completions";
      const extended = ["/tokenize", "/tokenize", "/v1/completions"];
      expect(h.engine.requests.map((r) => r.path)).toEqual(tokenIn ? [chat, ...extended, ...extended] : [chat, chat, chat]);
      if (tokenIn) expect(h.proxy.status().tokenIn).toEqual({ first: 1, extended: 2, fallbacks: 0, reasons: {} });
      await h.close();
    }
  });

  /** Runs an agent in token-in mode and checks each call extended the one before by ids: one trajectory. */
  async function expectExtended(agent: (baseUrl: string) => Promise<string>) {
    h = await startProxyHarness({ engine, proxy: { tokenIn: true } });
    const { rolloutId, baseUrl } = await h.claim();
    expect(await agent(baseUrl)).toBe(answer);
    const answers = h.engine.answers;
    expect(answers).toHaveLength(3);
    for (let i = 1; i < answers.length; i++) {
      const context = [...answers[i - 1]!.promptIds, ...answers[i - 1]!.responseIds];
      expect(answers[i]!.promptIds.slice(0, context.length)).toEqual(context);
    }
    const { adapted } = await trajectoriesOf(rolloutId);
    expect(adapted.triplets.map((t) => t.turnCount)).toEqual([3]);
    const t = adapted.triplets[0]!;
    expect(t.responseTokenIds.slice(-answers[2]!.responseIds.length)).toEqual(answers[2]!.responseIds);
  }

  it("streams chat in token-in mode: content as it comes, tool calls parsed from the generated text", async () => {
    await expectExtended((baseUrl) => chatAgent(baseUrl, true, h.engine.model));
  });

  for (const stream of [false, true]) {
    it(`serves the Responses API in token-in mode (${stream ? "streamed" : "whole"})`, async () => {
      await expectExtended(async (baseUrl) => {
        const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
        const tools: OpenAI.Responses.Tool[] = [{ type: "function", name: "lookup", parameters: { type: "object" }, strict: false }];
        const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "Weather in Paris?" }];
        for (;;) {
          let response: OpenAI.Responses.Response;
          if (stream)
            response = await client.responses.stream({ model: h.engine.model, instructions: "Be brief.", input, tools }).finalResponse();
          else response = await client.responses.create({ model: h.engine.model, instructions: "Be brief.", input, tools });
          input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]));
          const calls = response.output.filter((o) => o.type === "function_call");
          if (calls.length === 0)
            return response.output
              .flatMap((o) => (o.type === "message" ? o.content.map((c) => (c.type === "output_text" ? c.text : "")) : []))
              .join("");
          for (const c of calls) input.push({ type: "function_call_output", call_id: c.call_id, output: "24°C and sunny" });
        }
      });
    });

    it(`serves the Messages API in token-in mode (${stream ? "streamed" : "whole"})`, async () => {
      await expectExtended(async (baseUrl) => {
        const client = new Anthropic({ baseURL: baseUrl.replace(/\/v1$/, ""), apiKey: "k" });
        const tools: Anthropic.Tool[] = [{ name: "lookup", input_schema: { type: "object" } }];
        const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Weather in Paris?" }];
        for (;;) {
          const params = { model: h.engine.model, max_tokens: 256, system: "Be brief.", messages, tools };
          const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
          messages.push({ role: "assistant", content: message.content });
          const uses = message.content.filter((b) => b.type === "tool_use");
          if (message.stop_reason !== "tool_use") return message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
          messages.push({
            role: "user",
            content: uses.map((b) => ({ type: "tool_result" as const, tool_use_id: b.id, content: "24°C and sunny" })),
          });
        }
      });
    });
  }

  it("falls back to text when the history was edited, counts it and says why in the span", async () => {
    h = await startProxyHarness({ engine, proxy: { tokenIn: true } });
    const { rolloutId, baseUrl } = await h.claim();
    const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
    const model = h.engine.model;
    const first = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: chatTools,
    });
    const edited: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: "Weather in Lyon?" },
      first.choices[0]!.message,
      { role: "tool", tool_call_id: first.choices[0]!.message.tool_calls![0]!.id, content: "24°C" },
    ];
    await client.chat.completions.create({ model, messages: edited, tools: chatTools });
    const { spans } = await trajectoriesOf(rolloutId);
    expect(
      spans.map((s) => [attrString(s.attributes, sc.AGL_LLM_TOKEN_IN), attrString(s.attributes, sc.AGL_LLM_TOKEN_IN_FALLBACK)]),
    ).toEqual([
      ["first", undefined],
      ["fallback", "history_edited"],
    ]);
    expect(h.proxy.status().tokenIn).toMatchObject({ fallbacks: 1, reasons: { history_edited: 1 } });
    expect(h.engine.requests.map((r) => r.path)).toEqual(["/v1/chat/completions", "/v1/chat/completions"]);
  });

  it("falls back to text on an engine without /tokenize, and stops asking it", async () => {
    h = await startProxyHarness({ engine: { ...engine, tokenize: false }, proxy: { tokenIn: true } });
    const { rolloutId, baseUrl } = await h.claim();
    expect(await chatAgent(baseUrl, false, h.engine.model)).toBe(answer);
    const { spans } = await trajectoriesOf(rolloutId);
    expect(spans.map((s) => attrString(s.attributes, sc.AGL_LLM_TOKEN_IN_FALLBACK))).toEqual([
      undefined,
      "tokenize_failed",
      "tokenize_failed",
    ]);
    const chat = "/v1/chat/completions";
    // One refused pair of /tokenize calls, then none.
    expect(h.engine.requests.map((r) => r.path)).toEqual([chat, "/tokenize", "/tokenize", chat, chat]);
    expect(h.proxy.status().tokenIn).toMatchObject({ first: 1, fallbacks: 2, reasons: { tokenize_failed: 2 } });
  });

  it("is switched per rollout (metadata agl_token_in) and per engine (its resource's sampling_parameters)", async () => {
    h = await startProxyHarness({ engine, viaResources: true });
    await h.store.addResources({
      resources: {
        engine: {
          kind: { case: "llm", value: { endpoint: h.engine.url, model: h.engine.model, samplingParameters: { agl_token_in: true } } },
        },
      },
    });
    await new Promise((r) => setTimeout(r, 100));
    const { rolloutId, baseUrl } = await h.claim();
    await chatAgent(baseUrl, false, h.engine.model);
    expect((await trajectoriesOf(rolloutId)).adapted.triplets.map((t) => t.turnCount)).toEqual([3]);
    await h.store.enqueueRollouts({ rollouts: [{ metadata: { agl_token_in: false } }] });
    const { rollouts } = await h.store.dequeueRollouts({ workerId: "w" });
    const r = rollouts[0]!;
    await chatAgent(`${h.url}/rollout/${r.rolloutId}/attempt/${r.latestAttempt!.attemptId}/v1`, false, h.engine.model);
    expect((await trajectoriesOf(r.rolloutId)).adapted.triplets.map((t) => t.turnCount)).toEqual([1, 1, 1]);
  });
});
