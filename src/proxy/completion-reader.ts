/** The API a call used. */
export type CallKind = "chat" | "completions";

/** What a span records about an engine's answer. */
export interface CompletionRecord {
  promptIds: number[] | undefined;
  /** Ids of choice 0. */
  responseIds: number[] | undefined;
  /** Chosen-token logprobs of choice 0. */
  logprobs: number[] | undefined;
  responseId: string | undefined;
  model: string | undefined;
  finishReasons: string[];
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  /** The answer without the token-id and logprob fields (they have attributes of their own). */
  body: Record<string, unknown>;
}

type Json = Record<string, unknown>;

const isJson = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
/** The objects of a JSON array; other entries read as empty objects. */
const jsonArray = (v: unknown): Json[] => (Array.isArray(v) ? v.map((x) => (isJson(x) ? x : {})) : []);

const intsOrUndefined = (v: unknown): number[] | undefined =>
  Array.isArray(v) && v.every((x) => Number.isInteger(x)) ? (v as number[]) : undefined;

/** Chosen-token logprobs of a choice: chat (`logprobs.content[].logprob`) or completions (`token_logprobs`). */
export function choiceLogprobs(choice: Json): number[] | undefined {
  const lp = choice.logprobs;
  if (!isJson(lp)) return undefined;
  if (Array.isArray(lp.content)) return jsonArray(lp.content).map((x) => (typeof x.logprob === "number" ? x.logprob : Number.NaN));
  if (Array.isArray(lp.token_logprobs)) return lp.token_logprobs.map((x: unknown) => (typeof x === "number" ? x : Number.NaN));
  return undefined;
}

/** Reads a non-streamed answer (vLLM ≥ 0.10.2 fields; `response_token_ids` of older versions too). */
export function readCompletion(body: Json): CompletionRecord {
  const choices = jsonArray(body.choices);
  const first = choices.find((c) => (c.index ?? 0) === 0) ?? choices[0];
  const legacy: unknown = Array.isArray(body.response_token_ids) ? body.response_token_ids[0] : undefined;
  const usage = isJson(body.usage) ? body.usage : undefined;
  return {
    promptIds: intsOrUndefined(body.prompt_token_ids) ?? intsOrUndefined(first?.prompt_token_ids),
    responseIds: intsOrUndefined(first?.token_ids) ?? intsOrUndefined(legacy),
    logprobs: first ? choiceLogprobs(first) : undefined,
    responseId: typeof body.id === "string" ? body.id : undefined,
    model: typeof body.model === "string" ? body.model : undefined,
    finishReasons: choices.map((c) => String(c.finish_reason ?? "")),
    inputTokens: typeof usage?.prompt_tokens === "number" ? usage.prompt_tokens : undefined,
    outputTokens: typeof usage?.completion_tokens === "number" ? usage.completion_tokens : undefined,
    body: withoutTokenFields(body),
  };
}

function withoutTokenFields(body: Json): Json {
  const { prompt_token_ids: _p, response_token_ids: _r, ...rest } = body;
  if (Array.isArray(rest.choices)) {
    rest.choices = jsonArray(rest.choices).map((c) => {
      const { token_ids: _t, prompt_token_ids: _pp, logprobs: _l, ...choice } = c;
      return choice;
    });
  }
  return rest;
}

interface ToolCall {
  id: string | undefined;
  type: string;
  function: { name: string; arguments: string };
}

interface ChoiceState {
  index: number;
  role: string | undefined;
  content: string;
  text: string;
  toolCalls: ToolCall[];
  finishReason: string | null;
  tokenIds: number[];
  logprobs: number[];
  hasLogprobs: boolean;
}

/** Assembles a streamed answer chunk by chunk: ids and logprobs of every chunk, content, tool calls, usage. */
export interface StreamAssembler {
  add(chunk: Json): void;
  result(): CompletionRecord;
}

/** Creates a {@link StreamAssembler} for `kind`. */
export function createStreamAssembler(kind: CallKind): StreamAssembler {
  const choices = new Map<number, ChoiceState>();
  let promptIds: number[] | undefined;
  let id: string | undefined;
  let model: string | undefined;
  let created: unknown;
  let usage: Json | undefined;
  const state = (index: number) => {
    let s = choices.get(index);
    if (!s) {
      s = {
        index,
        role: undefined,
        content: "",
        text: "",
        toolCalls: [],
        finishReason: null,
        tokenIds: [],
        logprobs: [],
        hasLogprobs: false,
      };
      choices.set(index, s);
    }
    return s;
  };
  return {
    add(chunk) {
      id ??= typeof chunk.id === "string" ? chunk.id : undefined;
      model ??= typeof chunk.model === "string" ? chunk.model : undefined;
      created ??= chunk.created;
      promptIds ??= intsOrUndefined(chunk.prompt_token_ids);
      if (isJson(chunk.usage)) usage = chunk.usage;
      for (const c of jsonArray(chunk.choices)) {
        const s = state(typeof c.index === "number" ? c.index : 0);
        promptIds ??= intsOrUndefined(c.prompt_token_ids);
        const ids = intsOrUndefined(c.token_ids);
        if (ids) for (const t of ids) s.tokenIds.push(t);
        const lps = choiceLogprobs(c);
        if (lps) {
          s.hasLogprobs = true;
          for (const lp of lps) s.logprobs.push(lp);
        }
        if (typeof c.text === "string") s.text += c.text;
        const delta = c.delta;
        if (isJson(delta)) {
          if (typeof delta.role === "string") s.role = delta.role;
          if (typeof delta.content === "string") s.content += delta.content;
          for (const tc of jsonArray(delta.tool_calls)) mergeToolCall(s.toolCalls, tc);
        }
        if (c.finish_reason != null) s.finishReason = String(c.finish_reason);
      }
    },
    result() {
      const sorted = [...choices.values()].sort((a, b) => a.index - b.index);
      const first = choices.get(0);
      const body: Json = {
        id,
        object: kind === "chat" ? "chat.completion" : "text_completion",
        created,
        model,
        choices: sorted.map((s) => choiceBody(kind, s)),
        ...(usage ? { usage } : {}),
      };
      return {
        promptIds,
        responseIds: first && first.tokenIds.length > 0 ? first.tokenIds : undefined,
        logprobs: first?.hasLogprobs ? first.logprobs : undefined,
        responseId: id,
        model,
        finishReasons: sorted.map((s) => s.finishReason ?? ""),
        inputTokens: typeof usage?.prompt_tokens === "number" ? usage.prompt_tokens : promptIds?.length,
        outputTokens: typeof usage?.completion_tokens === "number" ? usage.completion_tokens : first?.tokenIds.length,
        body,
      };
    },
  };
}

function choiceBody(kind: CallKind, s: ChoiceState): Json {
  if (kind === "completions") return { index: s.index, text: s.text, finish_reason: s.finishReason };
  const message: Json = { role: s.role ?? "assistant", content: s.content === "" && s.toolCalls.length > 0 ? null : s.content };
  if (s.toolCalls.length > 0) message.tool_calls = s.toolCalls;
  return { index: s.index, message, finish_reason: s.finishReason };
}

function mergeToolCall(calls: ToolCall[], delta: Json): void {
  const index = typeof delta.index === "number" ? delta.index : calls.length;
  const call = calls[index] ?? { id: undefined, type: "function", function: { name: "", arguments: "" } };
  calls[index] = call;
  if (typeof delta.id === "string") call.id = delta.id;
  if (typeof delta.type === "string") call.type = delta.type;
  const fn = delta.function;
  if (isJson(fn)) {
    if (typeof fn.name === "string") call.function.name += fn.name;
    if (typeof fn.arguments === "string") call.function.arguments += fn.arguments;
  }
}
