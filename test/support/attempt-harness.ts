import type { JsonValue } from "@bufbuild/protobuf";
import { type RolloutFn, rollout } from "../../src/agent/agent.js";
import { silentLogger } from "../../src/core/logger.js";
import type { ResourcesData } from "../../src/agent/resources.js";
import type { Span } from "../../src/gen/agl/v1/types_pb.js";
import type { AttemptOutcome, AttemptTask } from "../../src/runner/attempt-task.js";
import { executeAttempt } from "../../src/runner/execute-attempt.js";

let counter = 0;

/** A task for one attempt with sensible test defaults. */
export function testTask(overrides: Partial<AttemptTask> = {}): AttemptTask {
  counter++;
  return {
    rolloutId: `ro-${String(counter).padStart(12, "0")}`,
    attemptId: `at-${String(counter).padStart(8, "0")}`,
    attemptSequence: 1,
    input: null,
    mode: undefined,
    metadata: {},
    groupId: "",
    resources: { resourcesId: "", version: 0, resources: {} } satisfies ResourcesData,
    abortGraceMs: 1_000,
    spanBatchSize: 64,
    spanFlushMs: 50,
    ...overrides,
  };
}

/**
 * Runs `fn` as one attempt in this thread, exactly as a runner would (scope, root span, result recording), and
 * returns its outcome and every span it produced, streamed or final, in order.
 */
export async function runAttempt(
  fn: RolloutFn<never>,
  options: { input?: JsonValue; task?: Partial<AttemptTask>; signal?: AbortSignal } = {},
): Promise<{ outcome: AttemptOutcome; spans: Span[]; task: AttemptTask }> {
  const task = testTask({ input: options.input ?? null, ...options.task });
  const spans: Span[] = [];
  const outcome = await executeAttempt(rollout(fn), task, {
    onSpans: (batch) => spans.push(...batch),
    signal: options.signal ?? new AbortController().signal,
    logger: silentLogger,
  });
  spans.push(...outcome.spans);
  return { outcome, spans, task };
}
