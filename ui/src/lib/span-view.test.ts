import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { attr } from "../../../src/adapter/attributes.js";
import { type Span, SpanSchema } from "../../../src/gen/agl/v1/types_pb.js";
import { attributeRows, attributeText, callTokens, rewardRows } from "./span-view.js";

const span = (spanId: string, sequenceId: number, name: string, attributes: Span["attributes"]): Span =>
  create(SpanSchema, { spanId, sequenceId, name, attributes });

describe("attributeText", () => {
  it("shows scalars and arrays, cutting long arrays", () => {
    expect(attributeText(attr.int(7))).toBe("7");
    expect(attributeText(attr.strings(["a", "b"]))).toBe('["a", "b"]');
    expect(attributeText(attr.ints([1, 2, 3]), 2)).toBe("[1, 2, … 3 items]");
  });
});

describe("attributeRows", () => {
  it("sorts keys", () => {
    const rows = attributeRows(span("s", 1, "x", { b: attr.string("2"), a: attr.bool(true) }));
    expect(rows).toEqual([
      { key: "a", value: "true" },
      { key: "b", value: "2" },
    ]);
  });
});

describe("rewardRows", () => {
  it("lists reward spans in sequence order with name and feedback", () => {
    const rows = rewardRows([
      span("r2", 5, "agentlightning.reward", {
        "agentlightning.reward.0.value": attr.double(1),
        "agentlightning.reward.0.name": attr.string("exact"),
      }),
      span("x", 2, "agent", {}),
      span("r1", 3, "agentlightning.reward", {
        "agentlightning.reward.0.value": attr.double(0.5),
        "agentlightning.reward.feedback": attr.string("close"),
      }),
    ]);
    expect(rows).toEqual([
      { spanId: "r1", sequenceId: 3, name: "agentlightning.reward", value: 0.5, feedback: "close" },
      { spanId: "r2", sequenceId: 5, name: "exact", value: 1 },
    ]);
  });
});

describe("callTokens", () => {
  it("reads token ids, logprobs and per-token texts from an LLM call span", () => {
    const response = { choices: [{ logprobs: { content: [{ token: "4", logprob: -0.1 }] } }] };
    const tokens = callTokens(
      span("llm", 1, "openai.chat", {
        "agl.llm.prompt_token_ids": attr.ints([1, 2, 3]),
        "agl.llm.response_token_ids": attr.ints([19]),
        "agl.llm.logprobs": attr.doubles([-0.1]),
        "agl.llm.response": attr.string(JSON.stringify(response)),
      }),
    );
    expect(tokens).toEqual({ promptTokenCount: 3, responseIds: [19], logprobs: [-0.1], tokenTexts: ["4"] });
  });

  it("is undefined for spans without response ids", () => {
    expect(callTokens(span("x", 1, "agent", {}))).toBeUndefined();
  });
});
