import type { Span } from "../gen/agl/v1/types_pb.js";
import { attrJson, attrString } from "./attributes.js";
import {
  AGL_LLM_REQUEST,
  AGL_LLM_RESPONSE,
  AI_SDK_PROMPT_MESSAGES,
  AI_SDK_RESPONSE_TEXT,
  AI_SDK_RESPONSE_TOOL_CALLS,
  GEN_AI_INPUT_MESSAGES,
  GEN_AI_OUTPUT_MESSAGES,
  GEN_AI_TOOL_DEFINITIONS,
} from "../core/semconv.js";

/** A chat message in the OpenAI chat-completions shape (plain JSON). */
export type ChatMessage = { role: string; content: unknown } & Record<string, unknown>;

/** One LLM call as a conversation: its input messages, then the assistant's answer. */
export interface Conversation {
  messages: ChatMessage[];
  tools: Record<string, unknown>[];
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads the conversation of an LLM-call span, from the first source present: agl's raw request/response bodies,
 * the gen_ai input/output messages (OpenAI chat or semconv `parts` format), or the Vercel AI SDK's attributes.
 */
export function conversationOf(span: Span): Conversation {
  const a = span.attributes;
  const request = attrJson(a, AGL_LLM_REQUEST);
  let messages: ChatMessage[] = [];
  let tools: Json[] = [];
  if (isObject(request)) {
    if (Array.isArray(request.messages)) messages = request.messages.filter(isObject).map(normalize);
    else if (typeof request.prompt === "string") messages = [{ role: "user", content: request.prompt }];
    if (Array.isArray(request.tools)) tools = request.tools.filter(isObject);
  } else {
    const input = attrJson(a, GEN_AI_INPUT_MESSAGES) ?? attrJson(a, AI_SDK_PROMPT_MESSAGES);
    if (Array.isArray(input)) messages = input.filter(isObject).flatMap(fromParts);
    const defs = attrJson(a, GEN_AI_TOOL_DEFINITIONS);
    if (Array.isArray(defs)) tools = defs.filter(isObject);
  }
  const answer = answerOf(span);
  if (answer) messages.push(answer);
  return { messages, tools };
}

function answerOf(span: Span): ChatMessage | undefined {
  const a = span.attributes;
  const response = attrJson(a, AGL_LLM_RESPONSE);
  if (isObject(response) && Array.isArray(response.choices) && isObject(response.choices[0])) {
    const choice = response.choices[0];
    if (isObject(choice.message)) return normalize(choice.message);
    if (typeof choice.text === "string") return { role: "assistant", content: choice.text };
  }
  const output = attrJson(a, GEN_AI_OUTPUT_MESSAGES);
  if (Array.isArray(output) && isObject(output[0])) return fromParts(output[0])[0];
  const text = attrString(a, AI_SDK_RESPONSE_TEXT);
  const toolCalls = attrJson(a, AI_SDK_RESPONSE_TOOL_CALLS);
  if (text === undefined && !Array.isArray(toolCalls)) return undefined;
  const message: ChatMessage = { role: "assistant", content: text ?? null };
  if (Array.isArray(toolCalls) && toolCalls.length > 0) message.tool_calls = toolCalls.filter(isObject).map(aiSdkToolCall);
  return message;
}

function normalize(m: Json): ChatMessage {
  return { ...m, role: typeof m.role === "string" ? m.role : "user", content: m.content ?? null };
}

/** A message in the semconv `parts` format or the AI SDK's content-parts format, as OpenAI chat messages. */
function fromParts(m: Json): ChatMessage[] {
  const role = typeof m.role === "string" ? m.role : "user";
  const parts = Array.isArray(m.parts) ? m.parts : Array.isArray(m.content) && role !== "user" ? m.content : undefined;
  if (!parts) return [normalize(m)];
  const text: string[] = [];
  const toolCalls: Json[] = [];
  const results: ChatMessage[] = [];
  for (const part of parts.filter(isObject)) {
    const type = part.type;
    if (type === "text") text.push(String(part.content ?? part.text ?? ""));
    else if (type === "tool_call" || type === "tool-call")
      toolCalls.push(type === "tool_call" ? semconvToolCall(part) : aiSdkToolCall(part));
    else if (type === "tool_call_response" || type === "tool-result") {
      const id = part.id ?? part.toolCallId;
      const result = part.result ?? part.output;
      results.push({ role: "tool", tool_call_id: id, content: typeof result === "string" ? result : JSON.stringify(result) });
    }
  }
  if (results.length > 0 && text.length === 0 && toolCalls.length === 0) return results;
  const message: ChatMessage = { role, content: text.length > 0 ? text.join("") : null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return [message, ...results];
}

function semconvToolCall(part: Json): Json {
  const args = part.arguments;
  return {
    id: part.id,
    type: "function",
    function: { name: part.name, arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}) },
  };
}

function aiSdkToolCall(part: Json): Json {
  const args = part.input ?? part.args;
  return {
    id: part.toolCallId,
    type: "function",
    function: { name: part.toolName, arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}) },
  };
}
