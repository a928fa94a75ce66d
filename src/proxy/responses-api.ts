import { type BoundedMap, createBoundedMap } from "./bounded-map.js";
import { outputItems, responseBody } from "./responses-output.js";
import { responsesStream } from "./responses-stream.js";
import { ApiRequestError, type ClientApi, chatAnswer, isJson, type Json, refuseUnknown, textOf } from "./client-api.js";

/** Options of {@link createResponsesApi}. */
export interface ResponsesApiOptions {
  /** Conversations kept for `previous_response_id` (oldest forgotten first; default 10,000). */
  maxStored?: number;
  /** Their total size in characters of JSON (default 256 Mi). */
  maxStoredChars?: number;
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
  const stored = createBoundedMap<Json[]>(options.maxStored ?? 10_000, options.maxStoredChars ?? 256 * 1024 * 1024);
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
      const kept = hasInstructions ? conversation.slice(1) : conversation;
      stored.set(`resp_${answerId}`, kept, JSON.stringify(kept).length);
    },
  };
}

function messagesOf(body: Json, stored: BoundedMap<Json[]>): Json[] {
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
