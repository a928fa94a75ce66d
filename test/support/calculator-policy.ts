import type { PolicyInput, Reply } from "./fake-llm-server.js";

/** A model for examples/calculator: solves "What is A op B?" with the calculate tool, then reports the tool's result. */
export function calculatorPolicy(input: PolicyInput): Reply {
  const last = input.messages.at(-1);
  if (last?.role === "tool") return { content: `${last.content}` };
  const user = [...input.messages].reverse().find((m) => m.role === "user");
  const match = /(-?\d+)\s*([-+*/])\s*(-?\d+)/.exec(typeof user?.content === "string" ? user.content : "");
  if (!match) return { content: "I cannot tell." };
  return { content: "", toolCalls: [{ name: "calculate", arguments: { a: Number(match[1]), op: match[2], b: Number(match[3]) } }] };
}
