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

const onEnter: Array<() => void> = [];

/**
 * Calls `enter` at the start of every attempt, synchronously inside its async context: for libraries that keep state
 * per async context (LangChain's configure hooks). Since Node 24, what AsyncLocalStorage's `enterWith` set after an
 * `await` no longer reaches the caller, so state set once where a hook was registered may not reach the attempts.
 */
export function onAttemptEnter(enter: () => void): void {
  onEnter.push(enter);
}

/** Runs `fn` (and everything it starts, sync or async) inside `scope`. */
export function runInAttempt<T>(scope: AttemptScope, fn: () => T): T {
  return storage.run(scope, () => {
    for (const enter of onEnter) enter();
    return fn();
  });
}
