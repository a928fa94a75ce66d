import { messageBody, messagesStream } from "./messages-stream.js";
import { ApiRequestError, type ChatAnswer, type ClientApi, chatAnswer, isJson, type Json, refuseUnknown, textOf } from "./client-api.js";

const known = new Set([
  "model",
  "messages",
  "system",
  "max_tokens",
  "tools",
  "tool_choice",
  "temperature",
  "top_p",
  "top_k",
  "stop_sequences",
  "stream",
  "metadata",
  "thinking",
  "service_tier",
]);

/**
 * The Anthropic Messages API on the engine's chat completions: `system` and content blocks (`text`, `tool_use`,
 * `tool_result`) become chat messages, tools become chat tools, and answers come back as `text` and `tool_use`
 * blocks with Anthropic stop reasons, whole or as the API's event stream.
 */
export function createMessagesApi(): ClientApi {
  return {
    name: "messages",
    toChat(body) {
      refuseUnknown(body, known);
      if (typeof body.max_tokens !== "number") throw new ApiRequestError("max_tokens", "`max_tokens` is required (a number)");
      if (isJson(body.thinking) && body.thinking.type !== "disabled")
        throw new ApiRequestError("thinking", "extended thinking is not supported by the agl proxy");
      const chat: Json = { model: body.model, messages: messagesOf(body), max_tokens: body.max_tokens };
      if (body.tools !== undefined) chat.tools = toolsOf(body.tools);
      if (body.tool_choice !== undefined) Object.assign(chat, toolChoiceOf(body.tool_choice));
      for (const key of ["temperature", "top_p", "top_k"]) if (typeof body[key] === "number") chat[key] = body[key];
      if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) chat.stop = body.stop_sequences;
      if (body.stream === true) chat.stream = true;
      return chat;
    },
    fromChat(completion, request, ids) {
      const answer = chatAnswer(completion);
      return { ...messageBody(answer, request), content: blocksOf(answer), ...(ids ? { agl: ids } : {}) };
    },
    stream: (request) => messagesStream(request),
  };
}

function messagesOf(body: Json): Json[] {
  const messages: Json[] = [];
  if (body.system !== undefined) messages.push({ role: "system", content: textOf(body.system, "system", ["text"]) });
  if (!Array.isArray(body.messages)) throw new ApiRequestError("messages", "`messages` must be an array");
  body.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    if (!isJson(m) || (m.role !== "user" && m.role !== "assistant"))
      throw new ApiRequestError(`${at}.role`, "each message needs the role user or assistant");
    if (typeof m.content === "string") {
      messages.push({ role: m.role, content: m.content });
      return;
    }
    if (!Array.isArray(m.content)) throw new ApiRequestError(`${at}.content`, "`content` must be a string or an array of blocks");
    let text = "";
    const calls: Json[] = [];
    m.content.forEach((block, j) => {
      const where = `${at}.content[${j}]`;
      if (!isJson(block)) throw new ApiRequestError(where, "content blocks must be objects");
      if (block.type === "text") text += String(block.text ?? "");
      else if (block.type === "tool_use" && m.role === "assistant")
        calls.push({ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
      else if (block.type === "tool_result" && m.role === "user") {
        const content = textOf(block.content, `${where}.content`, ["text"]);
        messages.push({ role: "tool", tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${content}` : content });
      } else
        throw new ApiRequestError(
          `${where}.type`,
          `content block type ${JSON.stringify(block.type)} is not supported here by the agl proxy`,
        );
    });
    if (m.role === "assistant")
      messages.push({
        role: "assistant",
        content: text === "" && calls.length > 0 ? null : text,
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
    else if (text !== "" || messages.at(-1)?.role !== "tool") messages.push({ role: "user", content: text });
  });
  return messages;
}

function toolsOf(tools: unknown): Json[] {
  if (!Array.isArray(tools)) throw new ApiRequestError("tools", "`tools` must be an array");
  return tools.map((t, i) => {
    if (!isJson(t) || (t.type !== undefined && t.type !== "custom") || typeof t.name !== "string")
      throw new ApiRequestError(`tools[${i}].type`, "only client tools (name, description, input_schema) are supported by the agl proxy");
    const fn: Json = { name: t.name, parameters: t.input_schema ?? { type: "object", properties: {} } };
    if (typeof t.description === "string") fn.description = t.description;
    return { type: "function", function: fn };
  });
}

function toolChoiceOf(choice: unknown): Json {
  if (!isJson(choice)) throw new ApiRequestError("tool_choice", "`tool_choice` must be an object");
  const parallel = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  if (choice.type === "auto" || choice.type === "none") return { tool_choice: choice.type, ...parallel };
  if (choice.type === "any") return { tool_choice: "required", ...parallel };
  if (choice.type === "tool") return { tool_choice: { type: "function", function: { name: choice.name } }, ...parallel };
  throw new ApiRequestError("tool_choice.type", "only auto, any, tool and none are supported");
}

function parseInput(args: string): unknown {
  try {
    return JSON.parse(args || "{}");
  } catch {
    return { _raw: args };
  }
}

function blocksOf(answer: ChatAnswer): Json[] {
  const blocks: Json[] = [];
  if (answer.content !== "" || answer.toolCalls.length === 0) blocks.push({ type: "text", text: answer.content });
  for (const c of answer.toolCalls) blocks.push({ type: "tool_use", id: c.id, name: c.name, input: parseInput(c.arguments) });
  return blocks;
}
