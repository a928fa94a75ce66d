import { context, ROOT_CONTEXT, type Span as OtelSpan, SpanStatusCode, trace } from "@opentelemetry/api";
import { type Agent, rolloutMethodFor, type RolloutContext } from "../agent/agent.js";
import { errorInfo, type ErrorInfo } from "../core/errors.js";
import { createConsoleLogger, type Logger, withPrefix } from "../core/logger.js";
import { resolveResources } from "../agent/resources.js";
import {
  AGL_AGENT_NAME_KEY,
  AGL_ATTEMPT_ID_KEY,
  AGL_ATTEMPT_SEQUENCE_KEY,
  AGL_ROLLOUT_ID_KEY,
  AGL_ROLLOUT_MODE_KEY,
  AGL_ROLLOUT_SPAN,
} from "../core/semconv.js";
import type { Span } from "../gen/agl/v1/types_pb.js";
import { createAttemptRecorder } from "../tracer/attempt-recorder.js";
import { type AttemptScope, runInAttempt } from "../tracer/attempt-scope.js";
import { createLlmCallRegistry } from "../tracer/llm-captures.js";
import { aglTracer } from "../tracer/provider.js";
import type { AbortKind, AttemptEnd, AttemptOutcome, AttemptTask } from "./attempt-task.js";
import { recordRolloutResult } from "./record-result.js";

/** What {@link executeAttempt} talks to: where span batches go, a signal to stop the attempt, and a logger. */
export interface ExecuteAttemptIo {
  onSpans(spans: Span[]): void;
  /** Aborting it (with an {@link AbortKind} as reason) stops the attempt. */
  signal: AbortSignal;
  logger?: Logger;
}

const abortErrors: Record<AbortKind, () => Error> = {
  cancelled: () => new DOMException("the rollout was cancelled", "AbortError"),
  timeout: () => new DOMException("the rollout timed out", "TimeoutError"),
  shutdown: () => new DOMException("the runner is shutting down", "AbortError"),
};
const endOnAbort: Record<AbortKind, AttemptEnd> = { cancelled: "cancelled", timeout: "timeout", shutdown: "interrupted" };

/**
 * Runs one attempt of `agent` in this thread: opens the attempt's root span and AsyncLocalStorage scope, calls the
 * rollout method for its mode, records what it returned (a reward, spans), and ends the attempt when the agent
 * finishes, throws, or — once aborted (cancellation, timeout, shutdown) — fails to finish within the grace period.
 */
export async function executeAttempt(agent: Agent<unknown>, task: AttemptTask, io: ExecuteAttemptIo): Promise<AttemptOutcome> {
  const controller = new AbortController();
  let abortKind: AbortKind | undefined;
  let graceTimer: NodeJS.Timeout | undefined;
  let abandon!: () => void;
  const abandoned = new Promise<"abandoned">((resolve) => (abandon = () => resolve("abandoned")));
  const abort = (kind: AbortKind) => {
    if (abortKind) return;
    abortKind = kind;
    controller.abort(abortErrors[kind]());
    // A shutdown already gave running agents their grace (`shutdownGraceMs`): hand the attempt back without waiting.
    graceTimer = setTimeout(abandon, kind === "shutdown" ? 0 : task.abortGraceMs);
  };
  const onExternal = () => abort(io.signal.reason as AbortKind);
  if (io.signal.aborted) onExternal();
  else io.signal.addEventListener("abort", onExternal, { once: true });
  const deadlineTimer =
    task.deadlineMs === undefined ? undefined : setTimeout(() => abort("timeout"), Math.max(0, task.deadlineMs - Date.now()));

  const logger = withPrefix(io.logger ?? createConsoleLogger(), `[${task.rolloutId} ${task.attemptId}]`);
  const recorder = createAttemptRecorder({ onBatch: io.onSpans, batchSize: task.spanBatchSize, flushMs: task.spanFlushMs });
  const recorded = new Set<string>();
  let root: OtelSpan | undefined;
  const scope: AttemptScope = {
    rolloutId: task.rolloutId,
    attemptId: task.attemptId,
    record(span) {
      recorded.add(span.spanId);
      recorder.record(span);
    },
    get rootSpan() {
      return root as OtelSpan;
    },
    llmCalls: createLlmCallRegistry(),
    logger,
  };
  const ctx: RolloutContext = {
    rolloutId: task.rolloutId,
    attemptId: task.attemptId,
    attemptSequence: task.attemptSequence,
    mode: task.mode,
    signal: controller.signal,
    logger,
    metadata: task.metadata,
    groupId: task.groupId,
  };

  let end: AttemptEnd = "succeeded";
  let error: ErrorInfo | undefined;
  const started = performance.now();
  try {
    const work = runInAttempt(scope, () => {
      root = aglTracer().startSpan(
        AGL_ROLLOUT_SPAN,
        {
          attributes: {
            [AGL_ROLLOUT_ID_KEY]: task.rolloutId,
            [AGL_ATTEMPT_ID_KEY]: task.attemptId,
            [AGL_ATTEMPT_SEQUENCE_KEY]: task.attemptSequence,
            [AGL_ROLLOUT_MODE_KEY]: task.mode ?? "",
            [AGL_AGENT_NAME_KEY]: agent.name ?? "agent",
          },
        },
        ROOT_CONTEXT,
      );
      return context.with(trace.setSpan(context.active(), root), async () => {
        const resources = resolveResources(task.resources, task.rolloutId, task.attemptId, task.proxyApiKey);
        const result = await rolloutMethodFor(agent, task.mode)(task.input, resources, ctx);
        recordRolloutResult(result, scope, recorded);
      });
    });
    const settled = await Promise.race([work.then(() => "done" as const), abandoned]);
    if (abortKind) end = settled === "done" && abortKind === "shutdown" ? "succeeded" : endOnAbort[abortKind];
    if (settled === "abandoned")
      logger.warn(`the agent did not stop within ${task.abortGraceMs} ms of being aborted (${abortKind}); abandoned`);
  } catch (thrown) {
    end = abortKind ? endOnAbort[abortKind] : "failed";
    error = errorInfo(thrown);
    if (!abortKind) logger.warn(`the rollout failed: ${error.type}: ${error.message}`);
    if (root) {
      root.recordException(thrown instanceof Error ? thrown : String(thrown));
      root.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
  } finally {
    clearTimeout(deadlineTimer);
    clearTimeout(graceTimer);
    io.signal.removeEventListener("abort", onExternal);
  }
  const agentMs = performance.now() - started;
  root?.end();
  const outcome: AttemptOutcome = { end, spans: recorder.close(), lateSpans: recorder.late, agentMs };
  if (error) outcome.error = error;
  return outcome;
}
