/**
 * How often a multi-turn tool agent's trajectory splits, chat mode against token-in mode. The loopback engine's
 * tokenizer merges a space with the letter or digit after it, and its model samples a share of answers unmerged (as
 * BPE models now and then do around whitespace); in chat mode the proxy sends the next turn as messages, the engine
 * renders that answer again with the merges, and the next prompt no longer starts with the sampled ids. Token-in sends
 * the next prompt as ids that extend the previous call's. Each rollout makes 2–5 tool calls before answering, through
 * the proxy, on each API (chat completions, Responses, Messages).
 *
 *   npx tsx bench/token-in/run.ts [--rollouts 100] [--share 0.1,0.3]
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { parseArgs } from "node:util";
import { spansToTriplets } from "../../src/adapter/spans-to-triplets.js";
import type { PolicyInput, Reply } from "../../test/support/fake-vllm.js";
import { type ProxyHarness, startProxyHarness } from "../../test/support/proxy-harness.js";

const { values: args } = parseArgs({
  options: { rollouts: { type: "string", default: "100" }, share: { type: "string", default: "0.1,0.3" } },
});
const rollouts = Number(args.rollouts);

/** Looks up `n` items (the number the user asks for), one tool call per turn, then answers with what it found. */
function policy(input: PolicyInput): Reply {
  const wanted = Number(/Do (\d+) lookups/.exec(input.promptText)?.[1] ?? 1);
  const done = input.messages.filter((m) => m.role === "tool").length;
  if (done < wanted)
    return {
      content: `Step ${done + 1} of ${wanted}: looking up item ${done + 1}.`,
      toolCalls: [{ name: "lookup", arguments: { item: done + 1 } }],
    };
  return { content: `Found all ${wanted} items, the last one is ${String(input.messages.at(-1)?.content)}.` };
}

const question = (i: number) => `Do ${2 + (i % 4)} lookups and summarize them.`;
const result = (item: unknown) => `item ${String(item)} is in aisle ${Number(item) * 7}`;

/** One agent per API: tool calls until the model answers. */
const agents: Record<string, (baseUrl: string, model: string, i: number) => Promise<void>> = {
  async chat(baseUrl, model, i) {
    const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
    const tools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: question(i) }];
    for (;;) {
      const message = (await client.chat.completions.create({ model, messages, tools })).choices[0]!.message;
      messages.push(message);
      if (!message.tool_calls?.length) return;
      for (const c of message.tool_calls) {
        const args = JSON.parse(c.type === "function" ? c.function.arguments : "{}") as { item: number };
        messages.push({ role: "tool", tool_call_id: c.id, content: result(args.item) });
      }
    }
  },
  async responses(baseUrl, model, i) {
    const client = new OpenAI({ baseURL: baseUrl, apiKey: "k" });
    const tools: OpenAI.Responses.Tool[] = [{ type: "function", name: "lookup", parameters: { type: "object" }, strict: false }];
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: question(i) }];
    for (;;) {
      const response = await client.responses.create({ model, input, tools });
      input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]));
      const calls = response.output.filter((o) => o.type === "function_call");
      if (calls.length === 0) return;
      for (const c of calls) input.push({ type: "function_call_output", call_id: c.call_id, output: result(JSON.parse(c.arguments).item) });
    }
  },
  async messages(baseUrl, model, i) {
    const client = new Anthropic({ baseURL: baseUrl.replace(/\/v1$/, ""), apiKey: "k" });
    const tools: Anthropic.Tool[] = [{ name: "lookup", input_schema: { type: "object" } }];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: question(i) }];
    for (;;) {
      const message = await client.messages.create({ model, max_tokens: 512, messages, tools });
      messages.push({ role: "assistant", content: message.content });
      const uses = message.content.filter((b) => b.type === "tool_use");
      if (uses.length === 0) return;
      messages.push({
        role: "user",
        content: uses.map((b) => ({
          type: "tool_result" as const,
          tool_use_id: b.id,
          content: result((b.input as { item: number }).item),
        })),
      });
    }
  },
};

console.log(`${rollouts} rollouts per row, 2–5 tool calls each before the answer; split = the trajectory has more than one sample`);
console.log("share unmerged  API        mode      calls  split rollouts  breaks  fallbacks  ms/call");
for (const share of args.share.split(",").map(Number)) {
  for (const api of Object.keys(agents)) {
    for (const tokenIn of [false, true]) {
      const h: ProxyHarness = await startProxyHarness({ engine: { policy, merges: true, reencodeShare: share }, proxy: { tokenIn } });
      let split = 0;
      let breaks = 0;
      const started = performance.now();
      for (let i = 0; i < rollouts; i++) {
        const { rolloutId, baseUrl } = await h.claim();
        await (agents[api] as (typeof agents)["chat"])(baseUrl, h.engine.model, i);
        const { spans } = await h.store.querySpans({ rolloutId });
        const { triplets, stats } = spansToTriplets(spans, { mode: "trajectory" });
        if (triplets.length > 1) split++;
        breaks += Object.values(stats.mismatches ?? {}).reduce((a: number, b) => a + Number(b), 0);
      }
      const calls = h.engine.answers.length;
      const ms = (performance.now() - started) / calls;
      const { fallbacks } = h.proxy.status().tokenIn;
      console.log(
        `${share.toFixed(2).padStart(14)}  ${api.padEnd(9)}  ${(tokenIn ? "token-in" : "chat").padEnd(8)}  ${String(calls).padStart(5)}  ` +
          `${`${split}/${rollouts} (${((100 * split) / rollouts).toFixed(0)}%)`.padStart(14)}  ${String(breaks).padStart(6)}  ` +
          `${String(fallbacks).padStart(9)}  ${ms.toFixed(2).padStart(7)}`,
      );
      await h.close();
    }
  }
}
