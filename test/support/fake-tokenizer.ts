/**
 * The deterministic tokenizer and chat template of the fake vLLM engine: one token per Unicode code point (id =
 * code point + 100) plus two special tokens, and a Qwen-style ChatML template. Decoding is exact, so tests can check
 * every id the engine sent against the text it stands for.
 */

export const IM_START = 1;
export const IM_END = 2;
const OFFSET = 100;
const specials = new Map([
  [IM_START, "<|im_start|>"],
  [IM_END, "<|im_end|>"],
]);

/** Text → ids (no special tokens). */
export function encode(text: string): number[] {
  const ids: number[] = [];
  for (const ch of text) ids.push((ch.codePointAt(0) as number) + OFFSET);
  return ids;
}

/** Ids → text (special tokens written out). */
export function decode(ids: readonly number[]): string {
  let out = "";
  for (const id of ids) out += specials.get(id) ?? String.fromCodePoint(id - OFFSET);
  return out;
}

/** The chosen-token logprob the engine reports for `id` at response position `i`. */
export function fakeLogprob(id: number, i: number): number {
  return -(((id * 31 + i) % 97) + 1) / 100;
}

/** A tool call as the model writes it. */
export interface ToolCallText {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * The parts of an assistant turn as the model generates it: optional content, then one Hermes-style block per tool
 * call: `<tool_call>\n{"name":…,"arguments":…}\n</tool_call>`. Each block is split into header / arguments / trailer so
 * a stream can announce the call, then stream its arguments.
 */
export function assistantParts(
  content: string,
  toolCalls: readonly ToolCallText[],
): { kind: "content" | "header" | "args" | "trailer"; text: string; call?: number }[] {
  const parts: { kind: "content" | "header" | "args" | "trailer"; text: string; call?: number }[] = [];
  if (content) parts.push({ kind: "content", text: content });
  toolCalls.forEach((tc, i) => {
    const sep = content || i > 0 ? "\n" : "";
    parts.push({ kind: "header", text: `${sep}<tool_call>\n{"name":${JSON.stringify(tc.name)},"arguments":`, call: i });
    parts.push({ kind: "args", text: JSON.stringify(tc.arguments), call: i });
    parts.push({ kind: "trailer", text: "}\n</tool_call>", call: i });
  });
  return parts;
}

/** A chat message as clients send it (OpenAI shape). */
export interface ChatMessage {
  role: string;
  content?: string | null | { type: string; text?: string }[];
  tool_calls?: { id?: string; type?: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? "").join("");
  return "";
}

/** ChatML prompt ids, with the generation prompt `<|im_start|>assistant\n` at the end. */
export function renderChat(messages: readonly ChatMessage[]): number[] {
  const ids: number[] = [];
  for (const m of messages) {
    ids.push(IM_START, ...encode(`${m.role}\n`));
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length > 0) {
      const calls = m.tool_calls.map((tc) => ({
        name: tc.function.name,
        arguments: JSON.parse(tc.function.arguments) as Record<string, unknown>,
      }));
      for (const part of assistantParts(contentText(m.content), calls)) ids.push(...encode(part.text));
    } else {
      ids.push(...encode(contentText(m.content)));
    }
    ids.push(IM_END, ...encode("\n"));
  }
  ids.push(IM_START, ...encode("assistant\n"));
  return ids;
}
