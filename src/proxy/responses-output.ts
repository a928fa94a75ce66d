import type { AnswerIds, ChatAnswer, Json } from "./client-api.js";
import { newId } from "./client-api.js";

/** The output items of a chat answer: its text as a `message`, then a `function_call` per tool call. */
export function outputItems(answer: ChatAnswer): Json[] {
  const items: Json[] = [];
  if (answer.content !== "") items.push(messageItem(newId("msg_"), answer.content, "completed"));
  for (const call of answer.toolCalls) items.push(callItem(call, "completed"));
  return items;
}

/** A `message` output item. */
export const messageItem = (id: string, text: string, status: string): Json => ({
  type: "message",
  id,
  status,
  role: "assistant",
  content: status === "in_progress" ? [] : [{ type: "output_text", text, annotations: [], logprobs: [] }],
});
/** A `function_call` output item. */
export const callItem = (call: ChatAnswer["toolCalls"][number], status: string): Json => ({
  type: "function_call",
  id: `fc_${call.id}`,
  call_id: call.id,
  name: call.name,
  arguments: call.arguments,
  status,
});

/** A Responses `response` object; without an answer, the one a stream opens with (`in_progress`). */
export function responseBody(id: string, answer: ChatAnswer | undefined, request: Json, output: Json[], ids: AnswerIds | undefined): Json {
  const incomplete = answer?.finishReason === "length";
  return {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: answer ? (incomplete ? "incomplete" : "completed") : "in_progress",
    error: null,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    model: answer?.model || request.model,
    output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: request.store ?? true,
    temperature: request.temperature ?? 1,
    text: request.text ?? { format: { type: "text" } },
    tool_choice: request.tool_choice ?? "auto",
    tools: request.tools ?? [],
    top_p: request.top_p ?? 1,
    truncation: "disabled",
    usage: answer
      ? {
          input_tokens: answer.promptTokens,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: answer.completionTokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: answer.promptTokens + answer.completionTokens,
        }
      : null,
    user: request.user ?? null,
    metadata: request.metadata ?? {},
    ...(ids ? { agl: ids } : {}),
  };
}
