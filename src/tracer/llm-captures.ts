import type { AttributeMap } from "./attributes.js";

/** What the fetch wrapper learnt about one LLM call: enough for a framework hook to enrich its own span. */
export interface LlmCapture {
  /** `id` of the response (`chatcmpl-…`), when the server sent one. */
  responseId?: string;
  model?: string;
  /** `performance.timeOrigin + performance.now()` when the request left. */
  startedAtMs: number;
  /** Span id of the fetch span that recorded the call. */
  spanId: string;
  /** Token-id, logprob and raw-body attributes, ready to copy. */
  attributes: AttributeMap;
  claimed?: boolean;
}

/** Options of {@link createLlmCallRegistry}. */
export interface LlmCallRegistryOptions {
  /** Captures kept per attempt; the oldest go first. Default 64. */
  capacity?: number;
}

/** The recent LLM calls of one attempt, so a framework span and the fetch span of the same call can be joined. */
export interface LlmCallRegistry {
  add(capture: LlmCapture): void;
  /**
   * The capture of the call a framework hook just finished: the one with `responseId` when given and known, else the
   * oldest unclaimed capture of `model` that started at or after `startedAfterMs`. Each capture is claimed once.
   */
  claim(query: { responseId?: string; model?: string; startedAfterMs?: number }): LlmCapture | undefined;
}

/** Creates the per-attempt registry of LLM calls. */
export function createLlmCallRegistry(options: LlmCallRegistryOptions = {}): LlmCallRegistry {
  const capacity = options.capacity ?? 64;
  const captures: LlmCapture[] = [];
  return {
    add(capture) {
      captures.push(capture);
      if (captures.length > capacity) captures.shift();
    },
    claim({ responseId, model, startedAfterMs }) {
      let found = responseId ? captures.find((c) => !c.claimed && c.responseId === responseId) : undefined;
      found ??= captures.find(
        (c) =>
          !c.claimed &&
          (model === undefined || c.model === undefined || c.model === model) &&
          (startedAfterMs === undefined || c.startedAtMs >= startedAfterMs - 1),
      );
      if (found) found.claimed = true;
      return found;
    },
  };
}
