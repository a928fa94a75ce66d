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

/** Looks the city up, then answers with the tool's result; every answer has " x" pairs the tokenizer merges. */
function weatherPolicy(input: PolicyInput): Reply {
  const last = input.messages.at(-1);
  if (last?.role === "tool") return { content: `It is ${String(last.content)} in Paris today.` };
  return { content: "Let me look it up.", toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] };
}
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
      expect(await chatAgent(baseUrl, false, h.engine.model)).toBe("It is 24°C and sunny in Paris today.");
      const [first, second] = h.engine.answers;
      const context = [...first!.promptIds, ...first!.responseIds];
      // The same text either way; only the ids differ.
      expect(decode(second!.promptIds).startsWith(decode(context))).toBe(true);
      expect(JSON.stringify(second!.promptIds.slice(0, context.length)) === JSON.stringify(context)).toBe(tokenIn);
      const { spans, adapted } = await trajectoriesOf(rolloutId);
      expect(spans.map((s) => attrString(s.attributes, sc.AGL_LLM_TOKEN_IN))).toEqual(tokenIn ? ["first", "extended"] : [undefined, undefined]);
      expect(adapted.triplets.map((t) => t.turnCount)).toEqual(tokenIn ? [2] : [1, 1]);
      expect(h.engine.requests.map((r) => r.path)).toEqual(
        tokenIn ? ["/v1/chat/completions", "/tokenize", "/tokenize", "/v1/completions"] : ["/v1/chat/completions", "/v1/chat/completions"],
      );
      await h.close();
    }
  });
});
