import { rewardAttributes, rewardOf } from "../adapter/rewards.js";
import { AGL_LLM_PROMPT_TOKEN_IDS, AGL_LLM_RESPONSE_TOKEN_IDS, GEN_AI_RESPONSE_ID } from "../core/semconv.js";
import type { Span } from "../gen/agl/v1/types_pb.js";

/**
 * What the aggregates read of a span, taken once when it is stored (SQL backends keep them as columns, so sums run
 * in the database without decoding spans): the reward it reports, and for an LLM call recorded with its token ids,
 * the prompt and response token counts and the key of the call: two records of one call (the proxy's and the
 * client's, a framework's span enriched from the client's) share its response id, and so its key.
 */
export interface SpanFacts {
  /** A finite reward (see `rewardOf`), else null. */
  reward: number | null;
  /** Null unless the span holds the call's response token ids. */
  promptTokens: number | null;
  responseTokens: number | null;
  /**
   * Null unless the span holds the call's response token ids; then `response:` and its `gen_ai.response.id`, or for a
   * span without one (a call of its own), `span:` and its attempt and span ids.
   */
  llmCallKey: string | null;
}

/** Every attribute {@link spanFacts} reads: a span's name and these attributes alone have the span's facts. */
export const factAttributes: ReadonlySet<string> = new Set([
  ...rewardAttributes,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_RESPONSE_TOKEN_IDS,
  GEN_AI_RESPONSE_ID,
]);

export function spanFacts(span: Pick<Span, "name" | "attributes" | "attemptId" | "spanId">): SpanFacts {
  const reward = rewardOf(span);
  const response = tokenCount(span, AGL_LLM_RESPONSE_TOKEN_IDS);
  return {
    reward: reward !== undefined && Number.isFinite(reward) ? reward : null,
    promptTokens: response === null ? null : (tokenCount(span, AGL_LLM_PROMPT_TOKEN_IDS) ?? 0),
    responseTokens: response,
    llmCallKey: response === null ? null : callKey(span),
  };
}

function tokenCount(span: Pick<Span, "attributes">, key: string): number | null {
  const value = span.attributes[key]?.value;
  return value?.case === "intArray" ? value.value.values.length : null;
}

function callKey(span: Pick<Span, "attributes" | "attemptId" | "spanId">): string {
  const id = span.attributes[GEN_AI_RESPONSE_ID]?.value;
  return id?.case === "stringValue" && id.value !== "" ? `response:${id.value}` : `span:${span.attemptId}/${span.spanId}`;
}
