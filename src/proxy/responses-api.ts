import {
  type AnswerIds,
  ApiRequestError,
  type ChatAnswer,
  type ClientApi,
  chatAnswer,
  isJson,
  type Json,
  newId,
  refuseUnknown,
  type StreamWriter,
  sseEvent,
  textOf,
} from "./client-api.js";

/** Options of {@link createResponsesApi}. */
export interface ResponsesApiOptions {
  /** Conversations kept for `previous_response_id` (oldest forgotten first; default 10,000). */
  maxStored?: number;
}

const known = new Set([
  "model",
  "input",
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "max_output_tokens",
  "temperature",
  "top_p",
  "stream",
  "text",
  "reasoning",
  "store",
  "metadata",
  "user",
  "previous_response_id",
  "include",
  "truncation",
  "safety_identifier",
  "prompt_cache_key",
  "service_tier",
  "stream_options",
]);
const textParts = ["input_text", "output_text", "text"];

/**
 * The OpenAI Responses API on the engine's chat completions: `instructions` and input items (messages, `function_call`,
 * `function_call_output`) become chat messages, function tools become chat tools, and answers come back as
 * `message` and `function_call` output items, whole or as the API's event stream. `previous_response_id` resolves to
 * the conversation of an earlier answer of this proxy.
 */
export function createResponsesApi(options: ResponsesApiOptions = {}): ClientApi {
  const maxStored = options.maxStored ?? 10_000;
  const stored = new Map<string, Json[]>();
  return {
    name: "responses",
    toChat(body) {
      refuseUnknown(body, known);
      const chat: Json = { model: body.model, messages: messagesOf(body, stored) };
      if (body.tools !== undefined) chat.tools = toolsOf(body.tools);
      if (body.tool_choice !== undefined) chat.tool_choice = toolChoiceOf(body.tool_choice);
      for (const [from, to] of [
        ["parallel_tool_calls", "parallel_tool_calls"],
        ["max_output_tokens", "max_tokens"],
        ["temperature", "temperature"],
        ["top_p", "top_p"],
        ["user", "user"],
      ] as const)
        if (body[from] !== undefined && body[from] !== null) chat[to] = body[from];
      if (body.stream === true) chat.stream = true;
      const format = isJson(body.text) ? body.text.format : undefined;
      if (isJson(body.text)) refuseUnknown(body.text, new Set(["format", "verbosity"]), "text.");
      if (isJson(format) && format.type === "json_schema") {
        chat.response_format = { type: "json_schema", json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
      } else if (isJson(format) && format.type === "json_object") chat.response_format = { type: "json_object" };
      else if (isJson(format) && format.type !== "text")
        throw new ApiRequestError("text.format.type", "only text, json_object and json_schema formats are supported");
      if (isJson(body.reasoning) && Object.values(body.reasoning).some((v) => v !== null && v !== undefined))
        throw new ApiRequestError(
          "reasoning",
          "`reasoning` options are not supported by the agl proxy (the engine's chat template decides)",
        );
      if (Array.isArray(body.include) && body.include.length > 0)
        throw new ApiRequestError("include", "`include` is not supported by the agl proxy");
      if (body.truncation !== undefined && body.truncation !== "disabled")
        throw new ApiRequestError("truncation", 'only `truncation: "disabled"` is supported');
      return chat;
    },
    fromChat(completion, request, ids) {
      const answer = chatAnswer(completion);
      const id = `resp_${answer.id}`;
      return responseBody(id, answer, request, outputItems(answer), ids);
    },
    stream: (request) => responsesStream(request),
    remember(answerId, conversation, request) {
      if (request.store === false) return;
      // An earlier call's instructions do not carry over to the next one (as in the Responses API).
      const hasInstructions = request.instructions !== undefined && request.instructions !== null;
      stored.set(`resp_${answerId}`, hasInstructions ? conversation.slice(1) : conversation);
      if (stored.size > maxStored) stored.delete(stored.keys().next().value as string);
    },
  };
}

function messagesOf(body: Json, stored: Map<string, Json[]>): Json[] {
  const messages: Json[] = [];
  if (typeof body.previous_response_id === "string") {
    const earlier = stored.get(body.previous_response_id);
    if (!earlier)
      throw new ApiRequestError(
        "previous_response_id",
        `previous response ${JSON.stringify(body.previous_response_id)} is not known to this proxy`,
      );
    messages.push(...earlier);
  }
  if (body.instructions !== undefined && body.instructions !== null)
    messages.unshift({ role: "system", content: textOf(body.instructions, "instructions", textParts) });
  const input = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
  if (!Array.isArray(input)) throw new ApiRequestError("input", "`input` must be a string or an array of input items");
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!isJson(item)) throw new ApiRequestError(at, `\`${at}\` must be an object`);
    const type = item.type ?? "message";
    const last = messages.at(-1);
    if (type === "message") {
      const role = item.role === "developer" ? "system" : item.role;
      if (role !== "user" && role !== "system" && role !== "assistant")
        throw new ApiRequestError(`${at}.role`, `role ${JSON.stringify(item.role)} is not supported`);
      messages.push({ role, content: textOf(item.content, `${at}.content`, [...textParts, "refusal"]) });
    } else if (type === "function_call") {
      const call = { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } };
      // Calls after the assistant's text (or after other calls) belong to that one assistant turn.
      if (last?.role === "assistant") last.tool_calls = [...((last.tool_calls as Json[] | undefined) ?? []), call];
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (type === "function_call_output") {
      const output = typeof item.output === "string" ? item.output : textOf(item.output, `${at}.output`, textParts);
      messages.push({ role: "tool", tool_call_id: item.call_id, content: output });
    } else throw new ApiRequestError(`${at}.type`, `input item type ${JSON.stringify(type)} is not supported by the agl proxy`);
  });
  return messages;
}

function toolsOf(tools: unknown): Json[] {
  if (!Array.isArray(tools)) throw new ApiRequestError("tools", "`tools` must be an array");
  return tools.map((t, i) => {
    if (!isJson(t) || t.type !== "function")
      throw new ApiRequestError(
        `tools[${i}].type`,
        `tool type ${JSON.stringify(isJson(t) ? t.type : t)} is not supported by the agl proxy (only function)`,
      );
    const fn: Json = { name: t.name, parameters: t.parameters ?? { type: "object", properties: {} } };
    if (typeof t.description === "string") fn.description = t.description;
    return { type: "function", function: fn };
  });
}

function toolChoiceOf(choice: unknown): unknown {
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (isJson(choice) && choice.type === "function") return { type: "function", function: { name: choice.name } };
  throw new ApiRequestError("tool_choice", "only auto, none, required and a function tool choice are supported");
}

function outputItems(answer: ChatAnswer): Json[] {
  const items: Json[] = [];
  if (answer.content !== "") items.push(messageItem(newId("msg_"), answer.content, "completed"));
  for (const call of answer.toolCalls) items.push(callItem(call, "completed"));
  return items;
}

const messageItem = (id: string, text: string, status: string): Json => ({
  type: "message",
  id,
  status,
  role: "assistant",
  content: status === "in_progress" ? [] : [{ type: "output_text", text, annotations: [], logprobs: [] }],
});
const callItem = (call: ChatAnswer["toolCalls"][number], status: string): Json => ({
  type: "function_call",
  id: `fc_${call.id}`,
  call_id: call.id,
  name: call.name,
  arguments: call.arguments,
  status,
});

function responseBody(id: string, answer: ChatAnswer | undefined, request: Json, output: Json[], ids: AnswerIds | undefined): Json {
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

/** The Responses event stream: created, output items with their deltas, then completed (or incomplete). */
function responsesStream(request: Json): StreamWriter {
  const writer = responsesEvents(request);
  // An answer without any chunk still opens with its created events.
  return { ...writer, end: (ids) => writer.chunk({}) + writer.end(ids) };
}

function responsesEvents(request: Json): StreamWriter {
  let seq = 0;
  let id = "";
  let out = "";
  const emit = (type: string, data: Json) => (out += sseEvent(type, { type, sequence_number: seq++, ...data }));
  const items: Json[] = [];
  let text: { index: number; id: string; text: string } | undefined;
  const calls = new Map<number, { index: number; call: ChatAnswer["toolCalls"][number] }>();
  const answer: ChatAnswer = { id: "", model: "", content: "", toolCalls: [], finishReason: "stop", promptTokens: 0, completionTokens: 0 };
  const closeText = () => {
    if (!text) return;
    const item = messageItem(text.id, text.text, "completed");
    const at = { item_id: text.id, output_index: text.index, content_index: 0 };
    emit("response.output_text.done", { ...at, text: text.text, logprobs: [] });
    emit("response.content_part.done", { ...at, part: (item.content as Json[])[0] });
    emit("response.output_item.done", { output_index: text.index, item });
    items[text.index] = item;
    text = undefined;
  };
  const closeCalls = () => {
    for (const { index, call } of calls.values()) {
      const item = callItem(call, "completed");
      emit("response.function_call_arguments.done", { item_id: item.id, output_index: index, arguments: call.arguments });
      emit("response.output_item.done", { output_index: index, item });
      items[index] = item;
    }
    calls.clear();
  };
  return {
    chunk(chunk) {
      out = "";
      if (!id) {
        answer.id = String(chunk.id ?? newId(""));
        answer.model = String(chunk.model ?? request.model ?? "");
        id = `resp_${answer.id}`;
        const response = responseBody(id, undefined, request, [], undefined);
        emit("response.created", { response });
        emit("response.in_progress", { response });
      }
      if (isJson(chunk.usage)) {
        answer.promptTokens = Number(chunk.usage.prompt_tokens ?? 0);
        answer.completionTokens = Number(chunk.usage.completion_tokens ?? 0);
      }
      const choice = (Array.isArray(chunk.choices) ? chunk.choices.filter(isJson) : []).find((c) => (c.index ?? 0) === 0);
      const delta = isJson(choice?.delta) ? choice.delta : {};
      if (typeof delta.content === "string" && delta.content !== "") {
        if (!text) {
          text = { index: items.length, id: newId("msg_"), text: "" };
          items.push(messageItem(text.id, "", "in_progress"));
          emit("response.output_item.added", { output_index: text.index, item: items[text.index] as Json });
          const part = { type: "output_text", text: "", annotations: [], logprobs: [] };
          emit("response.content_part.added", { item_id: text.id, output_index: text.index, content_index: 0, part });
        }
        text.text += delta.content;
        answer.content += delta.content;
        emit("response.output_text.delta", {
          item_id: text.id,
          output_index: text.index,
          content_index: 0,
          delta: delta.content,
          logprobs: [],
        });
      }
      for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isJson) : []) {
        const k = typeof tc.index === "number" ? tc.index : calls.size;
        const fn = isJson(tc.function) ? tc.function : {};
        let open = calls.get(k);
        if (!open) {
          closeText();
          const call = { id: typeof tc.id === "string" ? tc.id : newId("call_"), name: String(fn.name ?? ""), arguments: "" };
          open = { index: items.length, call };
          calls.set(k, open);
          answer.toolCalls.push(call);
          items.push(callItem(call, "in_progress"));
          emit("response.output_item.added", { output_index: open.index, item: items[open.index] as Json });
        }
        if (typeof fn.arguments === "string" && fn.arguments !== "") {
          open.call.arguments += fn.arguments;
          emit("response.function_call_arguments.delta", { item_id: `fc_${open.call.id}`, output_index: open.index, delta: fn.arguments });
        }
      }
      if (choice?.finish_reason) answer.finishReason = String(choice.finish_reason);
      return out;
    },
    end(ids) {
      out = "";
      closeText();
      closeCalls();
      const response = responseBody(id, answer, request, items, ids);
      emit(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
      return out;
    },
    fail(message) {
      out = "";
      emit("error", { code: "engine_broke_off", message, param: null });
      return out;
    },
  };
}
