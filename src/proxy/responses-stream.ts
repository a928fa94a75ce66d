import { emptyAnswer, readChunk, type ChatAnswer, isJson, type Json, newId, type StreamWriter, sseEvent } from "./client-api.js";
import { callItem, messageItem, responseBody } from "./responses-output.js";

/** The Responses event stream: created, output items with their deltas, then completed (or incomplete). */
export function responsesStream(request: Json): StreamWriter {
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
  const answer = emptyAnswer();
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
      const delta = readChunk(chunk, answer);
      if (delta.content !== "") {
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
      for (const tc of delta.toolCalls) {
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
