import {
  AGL_LLM_LOGPROBS,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_RESPONSE_TOKEN_IDS,
  GEN_AI_INPUT_MESSAGES,
  GEN_AI_OUTPUT_MESSAGES,
  GEN_AI_REQUEST_MAX_TOKENS,
  GEN_AI_REQUEST_MODEL,
  GEN_AI_REQUEST_TEMPERATURE,
  GEN_AI_REQUEST_TOP_P,
  GEN_AI_RESPONSE_FINISH_REASONS,
  GEN_AI_RESPONSE_ID,
  GEN_AI_RESPONSE_MODEL,
  GEN_AI_TOOL_DEFINITIONS,
  GEN_AI_USAGE_INPUT_TOKENS,
  GEN_AI_USAGE_OUTPUT_TOKENS,
} from "../../core/semconv.js";
import { type AttributeMap, attr } from "../attributes.js";

/** The OpenAI endpoints the fetch wrapper understands. */
export type OpenAiKind = "chat" | "completions";

// biome-ignore lint/suspicious/noExplicitAny: OpenAI request and response bodies are untyped JSON, checked where read
type Json = any;

const isInts = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

/** gen_ai request attributes of a chat completions or completions request body. */
export function requestAttributes(body: Json, kind: OpenAiKind): AttributeMap {
  const out: AttributeMap = {};
  if (typeof body?.model === "string") out[GEN_AI_REQUEST_MODEL] = attr.str(body.model);
  if (typeof body?.temperature === "number") out[GEN_AI_REQUEST_TEMPERATURE] = attr.double(body.temperature);
  if (typeof body?.top_p === "number") out[GEN_AI_REQUEST_TOP_P] = attr.double(body.top_p);
  const maxTokens = body?.max_completion_tokens ?? body?.max_tokens;
  if (typeof maxTokens === "number") out[GEN_AI_REQUEST_MAX_TOKENS] = attr.int(maxTokens);
  if (kind === "chat" && Array.isArray(body?.messages)) out[GEN_AI_INPUT_MESSAGES] = attr.json(body.messages);
  if (kind === "completions" && body?.prompt !== undefined) {
    out[GEN_AI_INPUT_MESSAGES] = attr.json([{ role: "user", content: body.prompt }]);
  }
  if (Array.isArray(body?.tools) && body.tools.length > 0) out[GEN_AI_TOOL_DEFINITIONS] = attr.json(body.tools);
  return out;
}

/**
 * gen_ai response attributes plus agl's token ids and logprobs, from a whole response body (or one assembled from a
 * stream): `prompt_token_ids` (chat: top level; completions: on the choice), choice 0's `token_ids`, its logprobs.
 */
export function responseAttributes(body: Json, kind: OpenAiKind): AttributeMap {
  const out: AttributeMap = {};
  if (typeof body?.id === "string") out[GEN_AI_RESPONSE_ID] = attr.str(body.id);
  if (typeof body?.model === "string") out[GEN_AI_RESPONSE_MODEL] = attr.str(body.model);
  const choices: Json[] = Array.isArray(body?.choices) ? body.choices : [];
  const reasons = choices.map((c) => c?.finish_reason).filter((r): r is string => typeof r === "string");
  if (reasons.length > 0) out[GEN_AI_RESPONSE_FINISH_REASONS] = attr.strs(reasons);
  const usage = body?.usage;
  if (typeof usage?.prompt_tokens === "number") out[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(usage.prompt_tokens);
  if (typeof usage?.completion_tokens === "number") out[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(usage.completion_tokens);
  const first = choices[0];
  const promptIds = body?.prompt_token_ids ?? first?.prompt_token_ids;
  if (isInts(promptIds)) out[AGL_LLM_PROMPT_TOKEN_IDS] = attr.ints(promptIds);
  const responseIds = first?.token_ids ?? first?.provider_specific_fields?.token_ids ?? body?.response_token_ids?.[0];
  if (isInts(responseIds)) out[AGL_LLM_RESPONSE_TOKEN_IDS] = attr.ints(responseIds);
  const logprobs = kind === "chat" ? first?.logprobs?.content?.map((t: Json) => t?.logprob) : first?.logprobs?.token_logprobs;
  if (Array.isArray(logprobs) && logprobs.length > 0 && logprobs.every((x: unknown) => typeof x === "number")) {
    out[AGL_LLM_LOGPROBS] = attr.doubles(logprobs);
  }
  if (choices.length > 0) {
    out[GEN_AI_OUTPUT_MESSAGES] = attr.json(
      choices.map((c) =>
        kind === "chat"
          ? { ...c?.message, finish_reason: c?.finish_reason }
          : { role: "assistant", content: c?.text, finish_reason: c?.finish_reason },
      ),
    );
  }
  return out;
}

/** Builds the whole response a stream of chunks stands for (chat or completions), token ids and logprobs included. */
export function createStreamAssembler(kind: OpenAiKind) {
  const response: Json = { choices: [] as Json[] };
  const choice = (index: number) => {
    response.choices[index] ??=
      kind === "chat"
        ? { index, message: { role: "assistant", content: "" }, finish_reason: null }
        : { index, text: "", finish_reason: null };
    return response.choices[index];
  };
  return {
    add(chunk: Json) {
      for (const key of ["id", "model", "created"]) if (chunk?.[key] !== undefined) response[key] ??= chunk[key];
      if (isInts(chunk?.prompt_token_ids)) response.prompt_token_ids = chunk.prompt_token_ids;
      if (chunk?.usage) response.usage = chunk.usage;
      for (const part of Array.isArray(chunk?.choices) ? chunk.choices : []) {
        const c = choice(part.index ?? 0);
        if (part.finish_reason) c.finish_reason = part.finish_reason;
        if (isInts(part.token_ids)) c.token_ids = [...(c.token_ids ?? []), ...part.token_ids];
        if (isInts(part.prompt_token_ids)) c.prompt_token_ids = part.prompt_token_ids;
        if (kind === "completions") {
          if (typeof part.text === "string") c.text += part.text;
          const lps = part.logprobs?.token_logprobs;
          if (Array.isArray(lps)) c.logprobs = { token_logprobs: [...(c.logprobs?.token_logprobs ?? []), ...lps] };
          continue;
        }
        const delta = part.delta ?? {};
        if (typeof delta.content === "string") c.message.content += delta.content;
        if (typeof delta.reasoning_content === "string")
          c.message.reasoning_content = (c.message.reasoning_content ?? "") + delta.reasoning_content;
        for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
          c.message.tool_calls ??= [];
          const index = call.index ?? 0;
          const slot = c.message.tool_calls[index] ?? { id: "", type: "function", function: { name: "", arguments: "" } };
          c.message.tool_calls[index] = slot;
          if (call.id) slot.id = call.id;
          if (call.function?.name) slot.function.name += call.function.name;
          if (call.function?.arguments) slot.function.arguments += call.function.arguments;
        }
        const lps = part.logprobs?.content;
        if (Array.isArray(lps)) c.logprobs = { content: [...(c.logprobs?.content ?? []), ...lps] };
      }
    },
    result: (): Json => response,
  };
}
