import { AsyncLocalStorage } from "node:async_hooks";
import type { Span as OtelSpan } from "@opentelemetry/api";
import type { Logger } from "../core/logger.js";
import type { Span } from "../gen/agl/v1/types_pb.js";
import type { LlmCallRegistry } from "./llm-captures.js";

/**
 * What code running inside one attempt can reach: the ids its spans carry, where finished spans go, the attempt's
 * root span (the parent of spans started without one), the LLM calls the fetch wrapper saw, and the logger.
 */
export interface AttemptScope {
  readonly rolloutId: string;
  readonly attemptId: string;
  /** Takes a finished span of this attempt (already converted to the store's shape). */
  record(span: Span): void;
  readonly rootSpan: OtelSpan;
  readonly llmCalls: LlmCallRegistry;
  readonly logger: Logger;
}

const storage = new AsyncLocalStorage<AttemptScope>();

/** The attempt the calling code runs in, or undefined outside of any rollout. */
export function currentAttempt(): AttemptScope | undefined {
  return storage.getStore();
}

/** Runs `fn` (and everything it starts, sync or async) inside `scope`. */
export function runInAttempt<T>(scope: AttemptScope, fn: () => T): T {
  return storage.run(scope, fn);
}
