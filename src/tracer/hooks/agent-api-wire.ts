import {
  AGL_LLM_API,
  AGL_LLM_CLIENT_REQUEST,
  AGL_LLM_LOGPROBS,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_REQUEST,
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
import { assignOwn } from "../../core/own-property.js";
import { isJson, type Json } from "../../proxy/client-api.js";
import { createMessagesApi } from "../../proxy/messages-api.js";
import { createResponsesApi } from "../../proxy/responses-api.js";
import { type AttributeMap, attr } from "../attributes.js";

/** The agent APIs besides chat completions that the fetch wrapper and hooks understand. */
export type AgentApi = "responses" | "messages";

// The proxy's own mappings, so a call reads the same whether the proxy or a hook recorded it.
const toChat = { responses: createResponsesApi({ maxStored: 0 }).toChat, messages: createMessagesApi().toChat };
const isInts = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

/**
 * Request attributes of a Responses or Messages body: the client's body as `agl.llm.client_request`, and the chat
 * completions request it stands for as `agl.llm.request` and `gen_ai.input.messages` (when it maps; else the raw
 * input), so adapters read every API as chat.
 */
export function agentRequestAttributes(body: Json, text: string | undefined, api: AgentApi): AttributeMap {
  const out: AttributeMap = { [AGL_LLM_API]: attr.str(api) };
  if (text !== undefined) out[AGL_LLM_CLIENT_REQUEST] = attr.str(text);
  if (typeof body.model === "string") out[GEN_AI_REQUEST_MODEL] = attr.str(body.model);
  if (typeof body.temperature === "number") out[GEN_AI_REQUEST_TEMPERATURE] = attr.double(body.temperature);
  if (typeof body.top_p === "number") out[GEN_AI_REQUEST_TOP_P] = attr.double(body.top_p);
  const maxTokens = body.max_output_tokens ?? body.max_tokens;
  if (typeof maxTokens === "number") out[GEN_AI_REQUEST_MAX_TOKENS] = attr.int(maxTokens);
  let chat: Json | undefined;
  try {
    chat = toChat[api](body);
  } catch {
    // A field the proxy would refuse (or an earlier response it cannot know): keep the raw input.
  }
  if (chat) {
    out[AGL_LLM_REQUEST] = attr.json(chat);
    out[GEN_AI_INPUT_MESSAGES] = attr.json(chat.messages);
    if (Array.isArray(chat.tools) && chat.tools.length > 0) out[GEN_AI_TOOL_DEFINITIONS] = attr.json(chat.tools);
  } else {
    out[GEN_AI_INPUT_MESSAGES] = attr.json(api === "responses" ? body.input : body.messages);
  }
  return out;
}

/** Response attributes of a whole Responses or Messages answer (or one assembled from its stream), agl's ids included. */
export function agentResponseAttributes(body: Json, api: AgentApi): AttributeMap {
  const out: AttributeMap = {};
  if (typeof body.id === "string") out[GEN_AI_RESPONSE_ID] = attr.str(body.id);
  if (typeof body.model === "string") out[GEN_AI_RESPONSE_MODEL] = attr.str(body.model);
  const usage = isJson(body.usage) ? body.usage : {};
  if (typeof usage.input_tokens === "number") out[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(usage.input_tokens);
  if (typeof usage.output_tokens === "number") out[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(usage.output_tokens);
  const ids = isJson(body.agl) ? body.agl : {};
  if (isInts(ids.prompt_token_ids)) out[AGL_LLM_PROMPT_TOKEN_IDS] = attr.ints(ids.prompt_token_ids);
  if (isInts(ids.token_ids)) out[AGL_LLM_RESPONSE_TOKEN_IDS] = attr.ints(ids.token_ids);
  if (Array.isArray(ids.logprobs) && ids.logprobs.every((x) => typeof x === "number")) out[AGL_LLM_LOGPROBS] = attr.doubles(ids.logprobs);
  const { message, finish } = api === "responses" ? fromResponse(body) : fromMessage(body);
  out[GEN_AI_RESPONSE_FINISH_REASONS] = attr.strs([finish]);
  out[GEN_AI_OUTPUT_MESSAGES] = attr.json([{ ...message, finish_reason: finish }]);
  return out;
}

function fromResponse(body: Json): { message: Json; finish: string } {
  let content = "";
  const calls: Json[] = [];
  for (const item of Array.isArray(body.output) ? body.output.filter(isJson) : []) {
    if (item.type === "message" && Array.isArray(item.content))
      for (const part of item.content.filter(isJson)) content += typeof part.text === "string" ? part.text : "";
    if (item.type === "function_call")
      calls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } });
  }
  const finish = body.status === "incomplete" ? "length" : calls.length > 0 ? "tool_calls" : "stop";
  return { message: chatMessage(content, calls), finish };
}

function fromMessage(body: Json): { message: Json; finish: string } {
  let content = "";
  const calls: Json[] = [];
  for (const block of Array.isArray(body.content) ? body.content.filter(isJson) : []) {
    if (block.type === "text") content += String(block.text ?? "");
    if (block.type === "tool_use")
      calls.push({ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
  }
  const reasons: Record<string, string> = { end_turn: "stop", stop_sequence: "stop", max_tokens: "length", tool_use: "tool_calls" };
  return { message: chatMessage(content, calls), finish: reasons[String(body.stop_reason)] ?? String(body.stop_reason ?? "") };
}

const chatMessage = (content: string, calls: Json[]): Json => ({
  role: "assistant",
  content: content === "" && calls.length > 0 ? null : content,
  ...(calls.length > 0 ? { tool_calls: calls } : {}),
});

/** Builds the whole answer a Responses or Messages event stream stands for; `complete` once its last event came. */
export function createAgentStreamAssembler(api: AgentApi) {
  let body: Json = {};
  let complete = false;
  const blocks: Json[] = [];
  const partial: string[] = [];
  return {
    add(event: Json) {
      const type = event.type;
      if (api === "responses") {
        if ((type === "response.completed" || type === "response.incomplete" || type === "response.failed") && isJson(event.response)) {
          body = event.response;
          complete = true;
        }
        return;
      }
      if (type === "message_start" && isJson(event.message)) body = { ...event.message, content: blocks };
      else if (type === "content_block_start" && isJson(event.content_block)) {
        blocks[Number(event.index)] = { ...event.content_block };
        partial[Number(event.index)] = "";
      } else if (type === "content_block_delta" && isJson(event.delta)) {
        const block = blocks[Number(event.index)];
        if (block && typeof event.delta.text === "string") block.text = String(block.text ?? "") + event.delta.text;
        if (typeof event.delta.partial_json === "string") partial[Number(event.index)] += event.delta.partial_json;
      } else if (type === "content_block_stop") {
        const block = blocks[Number(event.index)];
        const json = partial[Number(event.index)];
        if (block?.type === "tool_use" && json) {
          try {
            block.input = JSON.parse(json);
          } catch {}
        }
      } else if (type === "message_delta") {
        // Not Object.assign: a key named __proto__ (JSON.parse makes it an own key) would set the answer's prototype.
        if (isJson(event.delta)) assignOwn(body, event.delta);
        if (isJson(event.usage)) body.usage = { ...(isJson(body.usage) ? body.usage : {}), ...event.usage };
        if (isJson(event.agl)) body.agl = event.agl;
      } else if (type === "message_stop") complete = true;
    },
    result: (): Json => body,
    complete: () => complete,
  };
}
