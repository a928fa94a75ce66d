import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { RolloutMode } from "../agent/agent.js";
import type { ErrorInfo } from "../core/errors.js";
import type { ResourcesData } from "../agent/resources.js";
import type { Span } from "../gen/agl/v1/types_pb.js";

/** One attempt as handed to the thread that runs the agent (plain data: it crosses threads by structured clone). */
export interface AttemptTask {
  rolloutId: string;
  attemptId: string;
  attemptSequence: number;
  input: JsonValue;
  mode: RolloutMode | undefined;
  metadata: JsonObject;
  groupId: string;
  resources: ResourcesData;
  /** Epoch ms after which the attempt times out (from the rollout's `timeout_seconds`). */
  deadlineMs?: number;
  /** How long an aborted agent gets to finish before the attempt ends without it. */
  abortGraceMs: number;
  /** Spans per batch and the longest a span waits before its batch is handed on. */
  spanBatchSize: number;
  spanFlushMs: number;
  /** Given to the agent as the API key of proxy LLMs that name none (see `RunnerOptions.proxyApiKey`). */
  proxyApiKey?: string;
}

/** Why an attempt is stopped from outside. */
export type AbortKind = "cancelled" | "timeout" | "shutdown";

/**
 * How an attempt ended. `interrupted`: it was handed back (the runner shut down before the agent finished, or the
 * worker thread it waited on ended before it started), so the rollout goes back to the queue untouched. `lost`: an
 * infrastructure failure (its worker thread was killed while it ran), reported as unresponsive so that the rollout's
 * retries for infrastructure failures apply, not those for its agent's own.
 */
export type AttemptEnd = "succeeded" | "failed" | "timeout" | "cancelled" | "interrupted" | "lost";

/** The result of running one attempt. */
export interface AttemptOutcome {
  end: AttemptEnd;
  error?: ErrorInfo;
  /** Spans recorded but not yet handed on: the runner ships them last, before the attempt's status. */
  spans: Span[];
  /** Spans the agent ended after the attempt was over (never stored). */
  lateSpans: number;
  /** Milliseconds spent in the agent's rollout function. */
  agentMs: number;
}

/** The outcome of an attempt whose agent never ran (or whose run was lost): no spans, no agent time. */
export const unranOutcome = (end: AttemptEnd, error: ErrorInfo): AttemptOutcome => ({ end, error, spans: [], lateSpans: 0, agentMs: 0 });

/** A running attempt: its outcome, and a way to stop it. */
export interface AttemptHandle {
  readonly done: Promise<AttemptOutcome>;
  abort(kind: AbortKind): void;
}

/** Runs attempts somewhere: in this thread, or in a pool of worker threads. */
export interface AttemptExecutor {
  /** Attempts it runs at once. */
  readonly capacity: number;
  /** Starts an attempt; `onSpans` receives batches of finished spans while it runs. */
  start(task: AttemptTask, onSpans: (spans: Span[]) => void): AttemptHandle;
  /** Resolves once attempts can start (worker threads up, agent loaded); rejects when the agent cannot be loaded. */
  ready?(): Promise<void>;
  /** Figures for worker heartbeats. */
  stats(): Record<string, number>;
  close(): Promise<void>;
}
