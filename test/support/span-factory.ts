/** Builds store spans for adapter tests, with attributes given as plain values. */
import { create } from "@bufbuild/protobuf";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { type AttributeValue, type Span, SpanSchema, StatusCode } from "../../src/gen/agl/v1/types_pb.js";

export type PlainAttr = string | number | boolean | number[] | string[] | { doubles: number[] } | { int: number };

export interface SpanSpec {
  id: string;
  parent?: string;
  name?: string;
  seq: number;
  attrs?: Record<string, PlainAttr>;
  start?: number;
  end?: number;
  error?: boolean;
  rolloutId?: string;
  attemptId?: string;
}

function toAttr(v: PlainAttr): AttributeValue {
  if (typeof v === "string") return attr.string(v);
  if (typeof v === "boolean") return attr.bool(v);
  if (typeof v === "number") return attr.double(v);
  if (Array.isArray(v)) return v.length > 0 && typeof v[0] === "string" ? attr.strings(v as string[]) : attr.ints(v as number[]);
  if ("doubles" in v) return attr.doubles(v.doubles);
  return attr.int(v.int);
}

export function span(spec: SpanSpec): Span {
  const attributes: Record<string, AttributeValue> = {};
  for (const [k, v] of Object.entries(spec.attrs ?? {})) attributes[k] = toAttr(v);
  return create(SpanSchema, {
    rolloutId: spec.rolloutId ?? "ro-000000000001",
    attemptId: spec.attemptId ?? "at-00000001",
    sequenceId: spec.seq,
    traceId: `${"0".repeat(31)}1`,
    spanId: spec.id,
    parentId: spec.parent ?? "",
    name: spec.name ?? "span",
    status: { code: spec.error ? StatusCode.ERROR : StatusCode.OK },
    attributes,
    startTime: spec.start,
    endTime: spec.end,
  });
}

/** An LLM-call span as the proxy records it (ids, logprobs, response id). */
export function llmSpan(
  spec: SpanSpec & {
    prompt: number[];
    response: number[];
    logprobs?: number[];
    responseId?: string;
    source?: string;
    model?: string;
    resources?: [string, number];
  },
): Span {
  const attrs: Record<string, PlainAttr> = {
    [sc.AGL_LLM_SOURCE]: spec.source ?? "proxy",
    [sc.GEN_AI_OPERATION_NAME]: "chat",
    [sc.GEN_AI_RESPONSE_MODEL]: spec.model ?? "m",
    [sc.AGL_LLM_PROMPT_TOKEN_IDS]: spec.prompt,
    [sc.AGL_LLM_RESPONSE_TOKEN_IDS]: spec.response,
    ...(spec.logprobs ? { [sc.AGL_LLM_LOGPROBS]: { doubles: spec.logprobs } } : {}),
    ...(spec.responseId ? { [sc.GEN_AI_RESPONSE_ID]: spec.responseId } : {}),
    ...(spec.resources ? { [sc.AGL_LLM_RESOURCES_ID]: spec.resources[0], [sc.AGL_LLM_RESOURCES_VERSION]: { int: spec.resources[1] } } : {}),
    ...spec.attrs,
  };
  return span({ ...spec, name: spec.name ?? "chat m", attrs });
}

/** A reward span as emitters write it (`agentlightning.reward.0.value`). */
export function rewardSpan(spec: SpanSpec & { value: number; feedback?: string }): Span {
  return span({
    ...spec,
    name: sc.AGL_ANNOTATION,
    attrs: {
      [sc.rewardNameKey(0)]: "primary",
      [sc.rewardValueKey(0)]: spec.value,
      ...(spec.feedback ? { [sc.AGL_REWARD_FEEDBACK]: spec.feedback } : {}),
      ...spec.attrs,
    },
  });
}
