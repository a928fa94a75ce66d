import { attrDoubles, attrInts, attrJson, attrString } from "../../../src/adapter/attributes.js";
import { rewardFeedbackOf, rewardOf } from "../../../src/adapter/rewards.js";
import {
  AGL_LLM_LOGPROBS,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_RESPONSE,
  AGL_LLM_RESPONSE_TOKEN_IDS,
  rewardNameKey,
} from "../../../src/core/semconv.js";
import type { AttributeValue, Span } from "../../../src/gen/agl/v1/types_pb.js";
import { truncate } from "./format.js";
import { tokensFromResponse } from "./token-alignment.js";

/** An attribute value as display text: scalars as they are, arrays as JSON (long ones cut, with their length). */
export function attributeText(value: AttributeValue | undefined, maxItems = 64): string {
  const v = value?.value;
  switch (v?.case) {
    case "stringValue":
      return v.value;
    case "boolValue":
    case "intValue":
    case "doubleValue":
      return String(v.value);
    case "stringArray":
    case "boolArray":
    case "intArray":
    case "doubleArray": {
      const items = (v.value.values as readonly unknown[]).map((x) => (typeof x === "string" ? JSON.stringify(x) : String(x)));
      const shown = items.slice(0, maxItems).join(", ");
      return items.length > maxItems ? `[${shown}, … ${items.length} items]` : `[${shown}]`;
    }
    default:
      return "";
  }
}

/** A span's attributes as sorted key/value rows, values cut to `maxChars`. */
export function attributeRows(span: Pick<Span, "attributes">, maxChars = 2000): { key: string; value: string }[] {
  return Object.keys(span.attributes)
    .sort()
    .map((key) => ({ key, value: truncate(attributeText(span.attributes[key]), maxChars) }));
}

/** A reward a span reported. */
export interface RewardRow {
  spanId: string;
  sequenceId: number;
  name: string;
  value: number;
  feedback?: string;
}

/** Every reward among the spans, in span order (the last one is the rollout's final reward). */
export function rewardRows(spans: readonly Span[]): RewardRow[] {
  return spans
    .flatMap((span) => {
      const value = rewardOf(span);
      if (value === undefined) return [];
      const feedback = rewardFeedbackOf(span);
      const row: RewardRow = {
        spanId: span.spanId,
        sequenceId: span.sequenceId,
        name: attrString(span.attributes, rewardNameKey(0)) ?? span.name,
        value,
      };
      if (feedback !== undefined) row.feedback = feedback;
      return [row];
    })
    .sort((a, b) => a.sequenceId - b.sequenceId);
}

/** What an LLM call's span recorded about its tokens: the exact ids, logprobs, and the per-token texts if returned. */
export interface CallTokens {
  promptTokenCount?: number;
  responseIds: number[];
  logprobs?: number[];
  tokenTexts?: string[];
}

/** The token record of an LLM call span (the proxy's or a client hook's), or undefined when it has no response ids. */
export function callTokens(span: Pick<Span, "attributes">): CallTokens | undefined {
  const a = span.attributes;
  const responseIds = attrInts(a, AGL_LLM_RESPONSE_TOKEN_IDS);
  if (responseIds === undefined) return undefined;
  const out: CallTokens = { responseIds };
  const promptIds = attrInts(a, AGL_LLM_PROMPT_TOKEN_IDS);
  if (promptIds !== undefined) out.promptTokenCount = promptIds.length;
  const logprobs = attrDoubles(a, AGL_LLM_LOGPROBS);
  if (logprobs !== undefined) out.logprobs = logprobs;
  const { texts } = tokensFromResponse(attrJson(a, AGL_LLM_RESPONSE));
  if (texts !== undefined) out.tokenTexts = texts;
  return out;
}
