import type { Span } from "../../src/gen/agl/v1/types_pb.js";
import { fromAttributeValue } from "../../src/tracer/attributes.js";
import type { PolicyInput, Reply } from "../support/fake-llm-server.js";

/** A span's attributes as plain values. */
export const attrs = (span: Span | undefined): Record<string, unknown> =>
  Object.fromEntries(Object.entries(span?.attributes ?? {}).map(([k, v]) => [k, fromAttributeValue(v)]));

/** Spans recorded by one source (`agl.llm.source`). */
export const bySource = (spans: Span[], source: string) => spans.filter((s) => attrs(s)["agl.llm.source"] === source);

/** A calculator model: asks for `add` when tools are offered and the user just spoke, then answers with the sum. */
export const calculatorPolicy = (input: PolicyInput): Reply => {
  const last = input.messages.at(-1);
  if (input.tools.length > 0 && last?.role === "user") return { content: "", toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] };
  if (last?.role === "tool") return { content: `The answer is ${typeof last.content === "string" ? last.content : "5"}.` };
  return { content: "five" };
};

/** The ancestors of a span (nearest first), by parent id. */
export function ancestors(spans: Span[], span: Span | undefined): Span[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const out: Span[] = [];
  for (let p = span && byId.get(span.parentId); p; p = byId.get(p.parentId)) out.push(p);
  return out;
}
