import { AGL_LLM_TOKEN_IN, AGL_LLM_TOKEN_IN_FALLBACK } from "../core/semconv.js";
import { createBoundedMap } from "./bounded-map.js";
import { isJson, type Json } from "./client-api.js";
import type { CompletionRecord } from "./completion-reader.js";
import { completionToChat } from "./completion-to-chat.js";
import { engineTokenize } from "./engine-tokenize.js";
import type { Backend } from "./backends.js";
import type { CallPlan } from "./forward-call.js";
import type { Upstream } from "./upstream.js";

/** What a rollout's last call left: the messages it was asked, and the exact ids of its prompt and answer. */
interface Turn {
  messages: Json[];
  tools: string;
  promptIds: number[];
  responseIds: number[];
  answer: Json;
  finish: string;
}

/** How token-in served a call (the span says so: `agl.llm.token_in`, `agl.llm.token_in.fallback_reason`). */
export interface TokenInPlan {
  engine?: CallPlan["engine"];
  attributes: Record<string, string>;
  /** Keeps the answer's ids for the rollout's next call. */
  onAnswer: NonNullable<CallPlan["onAnswer"]>;
}

/** Token-in counters for `/proxy/status`. */
export interface TokenInStats {
  first: number;
  extended: number;
  fallbacks: number;
  reasons: Record<string, number>;
}

/** Options of {@link createTokenIn}. */
export interface TokenInOptions {
  upstream: Upstream;
  /** Rollouts whose last turn is kept (oldest forgotten first; default 10,000). */
  maxRollouts?: number;
  /** Their total size, in characters of messages plus 8 per token id (default 256 Mi). */
  maxChars?: number;
}

// The sampling fields a completions request takes as the chat request had them; any other field falls back to text.
const passed = new Set([
  "model",
  "max_tokens",
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "stop",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "stream",
  "stream_options",
  "user",
  "ignore_eos",
  "min_tokens",
]);
const dropped = new Set(["messages", "tools", "parallel_tool_calls", "logprobs", "return_token_ids", "max_completion_tokens", "n"]);
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const startsWith = (ids: readonly number[], prefix: readonly number[]) =>
  prefix.length <= ids.length && prefix.every((x, i) => ids[i] === x);

/** An assistant message as it counts for the template: its text and its calls' names and arguments. */
function assistantKey(m: Json | undefined): string {
  if (m?.role !== "assistant") return "";
  const calls = (Array.isArray(m.tool_calls) ? m.tool_calls.filter(isJson) : []).map((c) => {
    const fn = isJson(c.function) ? c.function : {};
    let args: unknown = fn.arguments;
    try {
      args = JSON.parse(String(fn.arguments));
    } catch {}
    return [fn.name, args];
  });
  return JSON.stringify([typeof m.content === "string" ? m.content : "", calls]);
}

/**
 * Token-in mode: keeps each rollout's exact token ids turn by turn and sends the next call as a token-id prompt to
 * the engine's completions endpoint: the previous prompt and answer ids, the template's end of that turn, and the
 * template's rendering of only the new messages (from the engine's `/tokenize`). A call whose history is not the
 * previous call plus its answer (messages edited, tools changed, an answer cut short) goes as text, counted, with the
 * reason in its span.
 */
export function createTokenIn(options: TokenInOptions) {
  const turns = createBoundedMap<Turn>(options.maxRollouts ?? 10_000, options.maxChars ?? 256 * 1024 * 1024);
  const stats: TokenInStats = { first: 0, extended: 0, fallbacks: 0, reasons: {} };
  // Engines that answered 404 to /tokenize are not asked again.
  const noTokenize = new Set<string>();

  const tokenize = async (backend: Backend, body: Json, signal: AbortSignal): Promise<number[]> => {
    const { status, tokens } = await engineTokenize(options.upstream, backend, body, signal);
    if (status === 404) noTokenize.add(backend.endpoint);
    if (!tokens) throw new Error(`tokenize answered ${status} without tokens`);
    return tokens;
  };

  /** The token-id prompt of a call, or why there is none. */
  const extend = async (prev: Turn | undefined, chat: Json, backend: Backend, signal: AbortSignal): Promise<number[] | string> => {
    if (!prev) return "first";
    const extra = Object.keys(chat).find((k) => !passed.has(k) && !dropped.has(k) && !(k === "tool_choice" && chat[k] === "auto"));
    if (extra) return `unsupported_field:${extra}`;
    if (chat.n !== undefined && chat.n !== 1) return "unsupported_field:n";
    const messages = chat.messages as Json[];
    const n = prev.messages.length;
    if (JSON.stringify(chat.tools ?? []) !== prev.tools) return "tools_changed";
    if (prev.finish !== "stop" && prev.finish !== "tool_calls") return "answer_cut_short";
    if (!sameJson(messages.slice(0, n), prev.messages)) return "history_edited";
    if (assistantKey(messages[n]) !== assistantKey(prev.answer)) return "answer_edited";
    if (messages.length <= n + 1) return "no_new_messages";
    if (noTokenize.has(backend.endpoint)) return "tokenize_failed";
    const tools = chat.tools ? { tools: chat.tools } : {};
    let before: number[];
    let full: number[];
    try {
      [before, full] = await Promise.all([
        tokenize(backend, { messages: messages.slice(0, n + 1), add_generation_prompt: false, ...tools }, signal),
        tokenize(backend, { messages, add_generation_prompt: true, ...tools }, signal),
      ]);
    } catch {
      return "tokenize_failed";
    }
    if (!startsWith(full, before)) return "template_not_prefix";
    // What the template writes after the answer's end-of-turn token (ChatML: the newline after <|im_end|>).
    const end = before.lastIndexOf(prev.responseIds.at(-1) as number);
    if (end < 0 || before.length - end > 8) return "no_end_of_turn";
    return [...prev.promptIds, ...prev.responseIds, ...before.slice(end + 1), ...full.slice(before.length)];
  };

  return {
    stats: (): TokenInStats => ({ ...stats, reasons: { ...stats.reasons } }),
    /** Plans a chat call of rollout `key` (`rollout/attempt`) in token-in mode. */
    async plan(key: string, chat: Json, backend: Backend, signal: AbortSignal): Promise<TokenInPlan> {
      const prev = turns.get(key);
      const prompt = await extend(prev, chat, backend, signal);
      const onAnswer = (completion: CompletionRecord, answer: Json) => {
        if (!completion.promptIds || !completion.responseIds || completion.responseIds.length === 0) return;
        const turn: Turn = {
          messages: chat.messages as Json[],
          tools: JSON.stringify(chat.tools ?? []),
          promptIds: completion.promptIds,
          responseIds: completion.responseIds,
          answer: answerMessage(answer),
          finish: completion.finishReasons[0] ?? "",
        };
        const weight = JSON.stringify(turn.messages).length + turn.tools.length + 8 * (turn.promptIds.length + turn.responseIds.length);
        turns.set(key, turn, weight);
      };
      if (typeof prompt === "string") {
        if (prompt === "first") {
          stats.first++;
          return { attributes: { [AGL_LLM_TOKEN_IN]: "first" }, onAnswer };
        }
        stats.fallbacks++;
        stats.reasons[prompt] = (stats.reasons[prompt] ?? 0) + 1;
        return { attributes: { [AGL_LLM_TOKEN_IN]: "fallback", [AGL_LLM_TOKEN_IN_FALLBACK]: prompt }, onAnswer };
      }
      stats.extended++;
      const body: Json = { prompt };
      for (const [k, v] of Object.entries(chat)) if (passed.has(k)) body[k] = v;
      if (chat.max_completion_tokens !== undefined) body.max_tokens = chat.max_completion_tokens;
      return { engine: { kind: "completions", body, toChat: completionToChat }, attributes: { [AGL_LLM_TOKEN_IN]: "extended" }, onAnswer };
    },
  };
}

/** A token-in proxy's state. */
export type TokenIn = ReturnType<typeof createTokenIn>;

function answerMessage(chat: Json): Json {
  const choice = Array.isArray(chat.choices) ? chat.choices.find(isJson) : undefined;
  return isJson(choice?.message) ? choice.message : {};
}
