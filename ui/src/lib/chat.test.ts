import { describe, expect, it } from "vitest";
import { chatView } from "./chat.js";

describe("chatView", () => {
  it("reads string content", () => {
    expect(chatView({ role: "user", content: "hi" })).toEqual({ role: "user", text: "hi", toolCalls: [], otherParts: [] });
  });

  it("joins text parts and lists other parts by type", () => {
    const v = chatView({ role: "user", content: [{ type: "text", text: "a" }, { type: "image_url" }, { type: "text", text: "b" }] });
    expect(v.text).toBe("ab");
    expect(v.otherParts).toEqual(["image_url"]);
  });

  it("reads tool calls and tool results", () => {
    const call = chatView({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: '{"a":1}' } }],
    });
    expect(call.toolCalls).toEqual([{ id: "c1", name: "add", arguments: '{"a":1}' }]);
    expect(call.text).toBe("");
    expect(chatView({ role: "tool", tool_call_id: "c1", content: "2" })).toMatchObject({ role: "tool", toolCallId: "c1", text: "2" });
  });

  it("survives malformed messages", () => {
    expect(chatView(null)).toEqual({ role: "unknown", text: "", toolCalls: [], otherParts: [] });
  });
});
