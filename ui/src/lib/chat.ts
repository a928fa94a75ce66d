/** A chat message as the LLM-call view shows it. */
export interface ChatView {
  role: string;
  /** The message's text parts joined; empty when it only calls tools. */
  text: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  /** For a tool result: the call it answers. */
  toolCallId?: string;
  /** Content parts that are not text (images, audio), by type. */
  otherParts: string[];
}

/**
 * Reads an OpenAI-format chat message (what GetRolloutMessages returns): string or content-part text, tool calls
 * with their arguments as text, the tool call a tool message answers.
 */
export function chatView(message: unknown): ChatView {
  const m = (message !== null && typeof message === "object" ? message : {}) as Record<string, unknown>;
  const view: ChatView = { role: typeof m.role === "string" ? m.role : "unknown", text: "", toolCalls: [], otherParts: [] };
  if (typeof m.content === "string") view.text = m.content;
  else if (Array.isArray(m.content)) {
    const texts: string[] = [];
    for (const part of m.content as Record<string, unknown>[]) {
      if (part?.type === "text" && typeof part.text === "string") texts.push(part.text);
      else view.otherParts.push(typeof part?.type === "string" ? part.type : "unknown");
    }
    view.text = texts.join("");
  }
  if (Array.isArray(m.tool_calls)) {
    for (const call of m.tool_calls as Record<string, unknown>[]) {
      const fn = (call?.function ?? {}) as Record<string, unknown>;
      const args = fn.arguments;
      view.toolCalls.push({
        id: typeof call?.id === "string" ? call.id : "",
        name: typeof fn.name === "string" ? fn.name : "",
        arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
      });
    }
  }
  if (typeof m.tool_call_id === "string") view.toolCallId = m.tool_call_id;
  return view;
}
