import {
  emptyAnswer,
  readChunk,
  type AnswerIds,
  type ChatAnswer,
  isJson,
  type Json,
  newId,
  type StreamWriter,
  sseEvent,
} from "./client-api.js";

const stopReasons: Record<string, string> = { stop: "end_turn", length: "max_tokens", tool_calls: "tool_use", function_call: "tool_use" };

/** A Messages `message` object for a chat answer, without its content blocks. */
export function messageBody(answer: ChatAnswer, request: Json): Json {
  return {
    id: `msg_${answer.id}`,
    type: "message",
    role: "assistant",
    model: answer.model || request.model,
    content: [],
    stop_reason: answer.stopSequence !== undefined ? "stop_sequence" : (stopReasons[answer.finishReason] ?? "end_turn"),
    stop_sequence: answer.stopSequence ?? null,
    usage: { input_tokens: answer.promptTokens, output_tokens: answer.completionTokens },
  };
}

/** The Messages event stream: message_start, content blocks with their deltas, message_delta, message_stop. */
export function messagesStream(request: Json): StreamWriter {
  const writer = messagesEvents(request);
  return { ...writer, end: (ids) => writer.chunk({}) + writer.end(ids) };
}

function messagesEvents(request: Json): StreamWriter {
  let out = "";
  let started = false;
  const emit = (type: string, data: Json) => (out += sseEvent(type, { type, ...data }));
  const answer = emptyAnswer();
  let block: { index: number; kind: "text" | "tool"; call?: number } | undefined;
  let blocks = 0;
  const open = (kind: "text" | "tool", content: Json, call?: number) => {
    if (block) emit("content_block_stop", { index: block.index });
    block = { index: blocks++, kind, call };
    emit("content_block_start", { index: block.index, content_block: content });
  };
  return {
    chunk(chunk) {
      out = "";
      if (!started) {
        started = true;
        answer.id = String(chunk.id ?? newId(""));
        answer.model = String(chunk.model ?? request.model ?? "");
        emit("message_start", { message: { ...messageBody(answer, request), stop_reason: null } });
      }
      const delta = readChunk(chunk, answer);
      if (delta.content !== "") {
        if (block?.kind !== "text") open("text", { type: "text", text: "" });
        answer.content += delta.content;
        emit("content_block_delta", { index: block?.index, delta: { type: "text_delta", text: delta.content } });
      }
      for (const tc of delta.toolCalls) {
        const k = typeof tc.index === "number" ? tc.index : answer.toolCalls.length;
        const fn = isJson(tc.function) ? tc.function : {};
        if (block?.kind !== "tool" || block.call !== k) {
          const call = { id: typeof tc.id === "string" ? tc.id : newId("toolu_"), name: String(fn.name ?? ""), arguments: "" };
          answer.toolCalls[k] = call;
          open("tool", { type: "tool_use", id: call.id, name: call.name, input: {} }, k);
        }
        if (typeof fn.arguments === "string" && fn.arguments !== "") {
          (answer.toolCalls[k] as ChatAnswer["toolCalls"][number]).arguments += fn.arguments;
          emit("content_block_delta", { index: block?.index, delta: { type: "input_json_delta", partial_json: fn.arguments } });
        }
      }
      return out;
    },
    end(ids: AnswerIds | undefined) {
      out = "";
      if (!block) open("text", { type: "text", text: "" });
      if (block) emit("content_block_stop", { index: block.index });
      const body = messageBody(answer, request);
      emit("message_delta", {
        delta: { stop_reason: body.stop_reason, stop_sequence: body.stop_sequence },
        usage: { input_tokens: answer.promptTokens, output_tokens: answer.completionTokens },
        ...(ids ? { agl: ids } : {}),
      });
      emit("message_stop", {});
      return out;
    },
    fail(message) {
      out = "";
      emit("error", { error: { type: "api_error", message } });
      return out;
    },
  };
}
