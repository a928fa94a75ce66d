import { randomHex } from "../store/ids.js";

/** The API a client called: the engine's own two, or one the proxy translates onto chat completions. */
export type ApiName = "chat" | "completions" | "responses" | "messages";

/** JSON object bodies, checked where read. */
export type Json = Record<string, unknown>;

export const isJson = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** A request field the proxy cannot serve faithfully: a 400 that names it, never a silent drop. */
export class ApiRequestError extends Error {
  override readonly name = "ApiRequestError";
  constructor(
    /** The field, as a path into the body (`tools[2].type`). */
    readonly param: string,
    message: string,
  ) {
    super(message);
  }
}

/** The token ids and logprobs of an answer, passed to the client under `agl` so hooks behind the proxy see them. */
export interface AnswerIds {
  prompt_token_ids?: number[];
  token_ids?: number[];
  logprobs?: number[];
}

/** A streamed answer in the client's API, fed the engine's chat chunks in order. */
export interface StreamWriter {
  /** The events for one chat completion chunk. */
  chunk(chunk: Json): string;
  /** The closing events (held back until the call's span is stored). */
  end(ids: AnswerIds | undefined): string;
  /** The event that reports a broken stream. */
  fail(message: string): string;
}

/** How an API maps onto the engine's chat completions, both ways. */
export interface ClientApi {
  readonly name: "responses" | "messages";
  /** The chat completions request for a client's body; throws {@link ApiRequestError}. */
  toChat(body: Json): Json;
  /** The client's whole answer for a chat completion. */
  fromChat(completion: Json, request: Json, ids: AnswerIds | undefined): Json;
  /** A writer of the client's stream for a chat completion stream. */
  stream(request: Json): StreamWriter;
  /** Called once an answer is complete: the chat messages of the call and its answer (for `previous_response_id`). */
  remember?(answerId: string, conversation: Json[], request: Json): void;
}

/** The error body of an API, in its own shape. */
export function errorBody(api: ApiName, status: number, code: string, message: string, param?: string): Json {
  if (api === "messages") return { type: "error", error: { type: anthropicType(status), message } };
  const type = status === 429 ? "rate_limit_error" : status >= 500 ? "upstream_error" : "invalid_request_error";
  return { error: { message, type, code, ...(param !== undefined || api === "responses" ? { param: param ?? null } : {}) } };
}

function anthropicType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 529 || status === 503) return "overloaded_error";
  return status >= 500 ? "api_error" : "invalid_request_error";
}

/** One server-sent event with an `event:` name, as the Responses and Messages APIs stream. */
export const sseEvent = (type: string, data: Json) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;

/** A fresh id with a prefix (`resp_`, `msg_`, …). */
export const newId = (prefix: string) => `${prefix}${randomHex(12)}`;

/** The text of OpenAI-style content: a string, or parts with `text`. */
export function textOf(content: unknown, where: string, textTypes: readonly string[]): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (!Array.isArray(content)) throw new ApiRequestError(where, `\`${where}\` must be a string or an array of content parts`);
  return content
    .map((part, i) => {
      if (!isJson(part) || !textTypes.includes(String(part.type)))
        throw new ApiRequestError(
          `${where}[${i}].type`,
          `content part type ${JSON.stringify(isJson(part) ? part.type : part)} is not supported by the agl proxy (only ${textTypes.join(", ")})`,
        );
      return typeof part.text === "string" ? part.text : "";
    })
    .join("");
}

/** Refuses every key of `body` not in `known`. */
export function refuseUnknown(body: Json, known: ReadonlySet<string>, where = ""): void {
  for (const key of Object.keys(body)) {
    if (!known.has(key) && body[key] !== undefined)
      throw new ApiRequestError(`${where}${key}`, `\`${where}${key}\` is not supported by the agl proxy`);
  }
}

/** The chat answer's parts: content, tool calls, finish reason and usage, from a chat completion. */
export interface ChatAnswer {
  id: string;
  model: string;
  content: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
  /** The stop string that ended the answer, when the engine says (vLLM's `stop_reason`). */
  stopSequence?: string;
  promptTokens: number;
  completionTokens: number;
}

/** Reads the answer of choice 0 of a chat completion. */
export function chatAnswer(completion: Json): ChatAnswer {
  const choices = Array.isArray(completion.choices) ? completion.choices.filter(isJson) : [];
  const choice = choices.find((c) => (c.index ?? 0) === 0) ?? {};
  const message = isJson(choice.message) ? choice.message : {};
  const usage = isJson(completion.usage) ? completion.usage : {};
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isJson) : [];
  return {
    id: typeof completion.id === "string" ? completion.id : randomHex(12),
    model: typeof completion.model === "string" ? completion.model : "",
    content: typeof message.content === "string" ? message.content : "",
    toolCalls: calls.map((c) => {
      const fn = isJson(c.function) ? c.function : {};
      return { id: typeof c.id === "string" ? c.id : newId("call_"), name: String(fn.name ?? ""), arguments: String(fn.arguments ?? "") };
    }),
    finishReason: String(choice.finish_reason ?? "stop"),
    ...(typeof choice.stop_reason === "string" ? { stopSequence: choice.stop_reason } : {}),
    promptTokens: typeof usage.prompt_tokens === "number" ? usage.prompt_tokens : 0,
    completionTokens: typeof usage.completion_tokens === "number" ? usage.completion_tokens : 0,
  };
}

/**
 * Reads a chat completion chunk into a streamed answer: usage and the finish reason go into `answer`; returns choice
 * 0's content delta and tool-call deltas.
 */
export function readChunk(chunk: Json, answer: ChatAnswer): { content: string; toolCalls: Json[] } {
  if (isJson(chunk.usage)) {
    answer.promptTokens = Number(chunk.usage.prompt_tokens ?? 0);
    answer.completionTokens = Number(chunk.usage.completion_tokens ?? 0);
  }
  const choice = (Array.isArray(chunk.choices) ? chunk.choices.filter(isJson) : []).find((c) => (c.index ?? 0) === 0);
  if (choice?.finish_reason) answer.finishReason = String(choice.finish_reason);
  if (typeof choice?.stop_reason === "string") answer.stopSequence = choice.stop_reason;
  const delta = isJson(choice?.delta) ? choice.delta : {};
  return {
    content: typeof delta.content === "string" ? delta.content : "",
    toolCalls: Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isJson) : [],
  };
}

/** An empty answer, filled in chunk by chunk. */
export const emptyAnswer = (): ChatAnswer => ({
  id: "",
  model: "",
  content: "",
  toolCalls: [],
  finishReason: "stop",
  promptTokens: 0,
  completionTokens: 0,
});

/** The assistant message of a chat answer, as the next request would send it back. */
export function assistantMessage(answer: ChatAnswer): Json {
  const message: Json = { role: "assistant", content: answer.content === "" && answer.toolCalls.length > 0 ? null : answer.content };
  if (answer.toolCalls.length > 0) {
    message.tool_calls = answer.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
  }
  return message;
}

/** Chat answers rebuilt as chat (token-in mode): whole as they are, streamed as chat chunks ending with `[DONE]`. */
export const chatShape: Pick<ClientApi, "fromChat" | "stream"> = {
  fromChat: (completion) => completion,
  stream: () => ({
    chunk: (chunk) => `data: ${JSON.stringify(chunk)}\n\n`,
    end: () => "data: [DONE]\n\n",
    fail: (message) => `data: ${JSON.stringify({ error: { message, type: "upstream_error", code: "engine_broke_off" } })}\n\n`,
  }),
};
