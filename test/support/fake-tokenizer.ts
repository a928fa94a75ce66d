/**
 * The deterministic tokenizer and chat template of the fake vLLM engine: one token per Unicode code point (id =
 * code point + 100) plus two special tokens, and a Qwen-style ChatML template (tools in a system block, Hermes tool
 * calls). Decoding is exact, so tests can check every id the engine sent against the text it stands for. With
 * `merges`, a space and the letter or digit after it are one token, as BPE merges them, while a model may still
 * sample them as two (`encodeUnmerged`): the same text then has two encodings, and re-rendering it splits.
 */

export const IM_START = 1;
export const IM_END = 2;
const OFFSET = 100;
const specials = new Map([
  [IM_START, "<|im_start|>"],
  [IM_END, "<|im_end|>"],
]);

const MERGED = 2_000_000;
const mergeable = /[A-Za-z0-9]/;

/** Text → ids (no special tokens); with `merges`, each space before a letter or digit merges with it. */
export function encode(text: string, merges = false): number[] {
  const ids: number[] = [];
  const chars = [...text];
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i] as string;
    const next = chars[i + 1];
    if (merges && ch === " " && next !== undefined && mergeable.test(next)) {
      ids.push(MERGED + (next.codePointAt(0) as number));
      i++;
    } else ids.push((ch.codePointAt(0) as number) + OFFSET);
  }
  return ids;
}

/** Ids → text (special tokens written out, merged tokens as their two characters). */
export function decode(ids: readonly number[]): string {
  let out = "";
  for (const id of ids)
    out += specials.get(id) ?? (id >= MERGED ? ` ${String.fromCodePoint(id - MERGED)}` : String.fromCodePoint(id - OFFSET));
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

/** How {@link renderChat} renders. */
export interface RenderOptions {
  /** End with the generation prompt `<|im_start|>assistant\n` (default true). */
  addGenerationPrompt?: boolean;
  /** The tokenizer's merges (see {@link encode}). */
  merges?: boolean;
}

const TOOLS_HEADER = "# Tools\n";

/** ChatML prompt ids: the tools (when any) in a system block first, then each message, then the generation prompt. */
export function renderChat(messages: readonly ChatMessage[], tools: readonly unknown[] = [], options: RenderOptions = {}): number[] {
  const enc = (text: string) => encode(text, options.merges);
  const ids: number[] = [];
  if (tools.length > 0)
    ids.push(IM_START, ...enc(`system\n${TOOLS_HEADER}${tools.map((t) => JSON.stringify(t)).join("\n")}`), IM_END, ...enc("\n"));
  for (const m of messages) {
    ids.push(IM_START, ...enc(`${m.role}\n`));
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length > 0) {
      const calls = m.tool_calls.map((tc) => ({
        name: tc.function.name,
        arguments: JSON.parse(tc.function.arguments) as Record<string, unknown>,
      }));
      for (const part of assistantParts(contentText(m.content), calls)) ids.push(...enc(part.text));
    } else {
      ids.push(...enc(contentText(m.content)));
    }
    ids.push(IM_END, ...enc("\n"));
  }
  if (options.addGenerationPrompt !== false) ids.push(IM_START, ...enc("assistant\n"));
  return ids;
}

const toolCallBlock = /\n?<tool_call>\n(\{[\s\S]*?\})\n<\/tool_call>/g;

/** Splits a generated assistant text into its content and Hermes tool calls. */
export function parseAssistant(text: string): { content: string; toolCalls: ToolCallText[] } {
  const toolCalls: ToolCallText[] = [];
  for (const m of text.matchAll(toolCallBlock)) toolCalls.push(JSON.parse(m[1] as string) as ToolCallText);
  return { content: text.replace(toolCallBlock, ""), toolCalls };
}

/**
 * Reads a rendered prompt back into its tools and messages (what the engine's policy sees of a token-id prompt);
 * `generating` when it ends with the generation prompt.
 */
export function parseChat(ids: readonly number[]): { messages: ChatMessage[]; tools: unknown[]; generating: boolean } {
  const text = decode(ids);
  const messages: ChatMessage[] = [];
  let tools: unknown[] = [];
  const blocks = text.split("<|im_start|>").slice(1);
  const last = blocks.at(-1);
  const generating = last === "assistant\n";
  for (const block of generating ? blocks.slice(0, -1) : blocks) {
    const body = block.replace(/<\|im_end\|>\n?$/, "");
    const nl = body.indexOf("\n");
    const role = body.slice(0, nl);
    const content = body.slice(nl + 1);
    if (role === "system" && content.startsWith(TOOLS_HEADER)) {
      tools = content
        .slice(TOOLS_HEADER.length)
        .split("\n")
        .map((line) => JSON.parse(line) as unknown);
    } else if (role === "assistant") {
      const parsed = parseAssistant(content);
      const message: ChatMessage = { role, content: parsed.content };
      if (parsed.toolCalls.length > 0)
        message.tool_calls = parsed.toolCalls.map((c) => ({
          type: "function",
          function: { name: c.name, arguments: JSON.stringify(c.arguments) },
        }));
      messages.push(message);
    } else messages.push({ role, content });
  }
  return { messages, tools, generating };
}
