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

/**
 * The attempt context and the enter hooks, shared by every copy of agl in a thread (on its global object). A thread
 * can hold two copies: a linked checkout's CLI runs its sources while the agent imports its `dist/`, or a CommonJS
 * hook compiles a second copy. Kept per module, the copy the agent imports would see no attempt: its emitters would
 * throw, its fetch wrapper and framework hooks would record nothing. The key names the shape of {@link AttemptScope};
 * change the number with the shape, so that copies that disagree on it keep apart.
 */
interface SharedAttemptContext {
  storage: AsyncLocalStorage<AttemptScope>;
  onEnter: Array<() => void>;
}
const sharedKey = Symbol.for("agl.attempt-context.v1");
const threadWide = globalThis as { [sharedKey]?: SharedAttemptContext };
threadWide[sharedKey] ??= { storage: new AsyncLocalStorage<AttemptScope>(), onEnter: [] };
const { storage, onEnter } = threadWide[sharedKey];

/** The attempt the calling code runs in, or undefined outside of any rollout. */
export function currentAttempt(): AttemptScope | undefined {
  return storage.getStore();
}

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
