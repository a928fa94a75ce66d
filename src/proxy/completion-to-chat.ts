import { isJson, type Json, newId } from "./client-api.js";
import type { ToChat } from "./forward-call.js";

const OPEN = "<tool_call>";
const block = /\n?<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g;

/** Hermes-style tool calls (`<tool_call>{"name", "arguments"}</tool_call>`, Qwen's format) split off generated text. */
export function parseToolCalls(text: string): { content: string; calls: { id: string; name: string; arguments: string }[] } {
  const calls: { id: string; name: string; arguments: string }[] = [];
  for (const m of text.matchAll(block)) {
    try {
      const call = JSON.parse(m[1] as string) as { name?: unknown; arguments?: unknown };
      if (typeof call.name !== "string") continue;
      const args = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {});
      calls.push({ id: newId("call_"), name: call.name, arguments: args });
    } catch {
      // Not a well-formed call: it stays in the content.
    }
  }
  if (calls.length === 0) return { content: text, calls };
  return { content: text.slice(0, text.indexOf(OPEN)).replace(/\n$/, ""), calls };
}

const chatLogprobs = (lps: unknown) =>
  Array.isArray(lps) ? { content: lps.map((logprob) => ({ logprob: typeof logprob === "number" ? logprob : null })) } : null;
const firstChoice = (body: Json): Json => (Array.isArray(body.choices) ? (body.choices.find(isJson) ?? {}) : {});

/**
 * Turns the engine's completions answers to a token-id prompt into the chat completions the client asked for: the
 * generated text becomes content and tool calls, token ids and logprobs move to where chat puts them. A stream shows
 * content as it comes and holds back what may open a tool call; tool calls come whole at the end.
 */
export const completionToChat: ToChat = {
  whole(body) {
    const choice = firstChoice(body);
    const { content, calls } = parseToolCalls(String(choice.text ?? ""));
    const message: Json = { role: "assistant", content: content === "" && calls.length > 0 ? null : content };
    if (calls.length > 0)
      message.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
    const finish = calls.length > 0 ? "tool_calls" : (choice.finish_reason ?? "stop");
    return {
      id: typeof body.id === "string" ? body.id : newId("cmpl-"),
      object: "chat.completion",
      created: body.created,
      model: body.model,
      ...(choice.prompt_token_ids ? { prompt_token_ids: choice.prompt_token_ids } : {}),
      choices: [
        {
          index: 0,
          message,
          finish_reason: finish,
          logprobs: chatLogprobs(isJson(choice.logprobs) ? choice.logprobs.token_logprobs : undefined),
          ...(choice.token_ids ? { token_ids: choice.token_ids } : {}),
        },
      ],
      ...(isJson(body.usage) ? { usage: body.usage } : {}),
    };
  },
  stream() {
    let text = "";
    let shown = 0;
    let finish: unknown = null;
    let head: Json = {};
    let usage: unknown;
    const chunkOf = (choice: Json, extra: Json = {}): Json => ({
      ...head,
      object: "chat.completion.chunk",
      ...extra,
      choices: [{ index: 0, ...choice }],
    });
    return {
      push(chunk) {
        const first = !head.id;
        if (first) {
          const id = typeof chunk.id === "string" ? chunk.id : newId("cmpl-");
          head = { id, created: chunk.created, model: chunk.model };
        }
        const choice = firstChoice(chunk);
        if (!Array.isArray(chunk.choices) || chunk.choices.length === 0) {
          // The usage chunk goes last, after the tool calls and the finish reason.
          usage = chunk.usage;
          return [];
        }
        text += typeof choice.text === "string" ? choice.text : "";
        if (choice.finish_reason) finish = choice.finish_reason;
        // Content is shown up to a tool call's start, holding back a tail that may yet become `<tool_call>`.
        const open = text.indexOf(OPEN);
        let upTo = open >= 0 ? open : text.length;
        if (open < 0)
          for (let k = Math.min(OPEN.length, text.length); k > 0; k--) if (OPEN.startsWith(text.slice(-k))) upTo = text.length - k;
        if (open >= 0 || upTo < text.length) upTo = text.slice(0, upTo).endsWith("\n") ? upTo - 1 : upTo;
        const delta = upTo > shown ? text.slice(shown, upTo) : "";
        shown = Math.max(shown, upTo);
        const extra = choice.prompt_token_ids ? { prompt_token_ids: choice.prompt_token_ids } : {};
        return [
          chunkOf(
            {
              delta: { ...(first ? { role: "assistant" } : {}), ...(delta ? { content: delta } : {}) },
              finish_reason: null,
              logprobs: chatLogprobs(isJson(choice.logprobs) ? choice.logprobs.token_logprobs : undefined),
              ...(choice.token_ids ? { token_ids: choice.token_ids } : {}),
            },
            extra,
          ),
        ];
      },
      end() {
        const { content, calls } = parseToolCalls(text);
        const out: Json[] = [];
        const rest = calls.length > 0 ? content.slice(shown) : text.slice(shown);
        if (rest) out.push(chunkOf({ delta: { content: rest }, finish_reason: null }));
        for (const [index, c] of calls.entries()) {
          const call = { index, id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } };
          out.push(chunkOf({ delta: { tool_calls: [call] } }));
        }
        out.push(chunkOf({ delta: {}, finish_reason: calls.length > 0 ? "tool_calls" : (finish ?? "stop") }));
        if (usage) out.push({ ...head, object: "chat.completion.chunk", choices: [], usage });
        return out;
      },
    };
  },
};
