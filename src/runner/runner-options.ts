import type { Logger } from "../core/logger.js";
import type { StoreApi } from "../store/store-api.js";
import type { SpanShipperOptions } from "../tracer/span-shipper.js";
import type { AttemptEnd, AttemptExecutor } from "./attempt-task.js";

/** Options of `createRunner`. */
export interface RunnerOptions {
  store: StoreApi;
  /** Where attempts run: `createInProcessExecutor({ agent })` or `createPoolExecutor({ agentModule, … })`. */
  executor: AttemptExecutor;
  /** How this runner appears in the store's workers. Default `{hostname}-{pid}`. */
  workerId?: string;
  /** Server-side wait of each dequeue when the queue is empty. Default 2 s. */
  pollWaitSeconds?: number;
  /**
   * An attempt that shipped no span for this long sends a heartbeat (and learns whether it was cancelled). Default
   * `RUNNER_HEARTBEAT_SECONDS` (5 s); the store's default `unresponsive_seconds` is six of them.
   */
  heartbeatIntervalMs?: number;
  /** Period of the worker heartbeat (`UpdateWorker` with stats). Default: `heartbeatIntervalMs`. */
  workerHeartbeatMs?: number;
  /** How long an agent aborted by cancellation or timeout gets to stop by itself. Default 5 s. */
  abortGraceMs?: number;
  /**
   * How long `stop()` lets running attempts finish; then the rest are aborted and handed back at once (their agents
   * get no further grace). Default 30 s.
   */
  shutdownGraceMs?: number;
  /**
   * How long a fetched resources snapshot is reused for later claims (a snapshot updated under the same id reaches
   * new attempts at most this late). Default 1 s; 0 fetches for every dequeued batch.
   */
  resourcesCacheMs?: number;
  /** Stop after claiming this many rollouts (and finishing them). Default: run until `stop()`. */
  maxRollouts?: number;
  /**
   * The API key agents get for a proxy LLM whose resource names none. `agl run` and `agl train` pass the store token:
   * the agl LLM proxy served by a store that requires a token requires the same one. Default: none.
   */
  proxyApiKey?: string;
  /** Spans per batch and linger in the agent's thread. Defaults 64 and 200 ms. */
  spanBatchSize?: number;
  spanFlushMs?: number;
  /**
   * How long span batches and each attempt's final report are retried while the store cannot be reached (a network
   * cut, a restarting server) before they are given up. Default 5 min.
   */
  retryForMs?: number;
  /** Tuning of the span shipper (batch size, queue bound, retries). */
  shipper?: Omit<SpanShipperOptions, "store" | "onAttemptStatus" | "logger">;
  logger?: Logger;
  /** Called after each attempt's end was reported (or failed to be). */
  onAttemptEnd?(event: AttemptEndEvent): void;
}

/** One finished attempt, as reported by {@link RunnerOptions.onAttemptEnd}. */
export interface AttemptEndEvent {
  rolloutId: string;
  attemptId: string;
  end: AttemptEnd;
  /** Time in the agent's rollout function. */
  agentMs: number;
  /** Time from the claimed rollout being dispatched to its final update being sent, minus `agentMs`. */
  overheadMs: number;
}

/** Counts of a runner's attempts by how they ended. */
export type RunnerSummary = Record<AttemptEnd, number> & { claimed: number };

/** A runner: claims rollouts from the store, runs them on its executor, reports spans and outcomes. */
export interface Runner {
  readonly workerId: string;
  /**
   * Runs until `stop()` (or `maxRollouts`); resolves with the counts once every claimed attempt is reported (or given
   * up after `retryForMs`). The process stays up meanwhile, also while the store is out of reach.
   */
  run(): Promise<RunnerSummary>;
  /**
   * Stops claiming, lets running attempts finish for `graceMs` (default `shutdownGraceMs`), then aborts the rest and
   * hands them back to the queue. Resolves when `run()` has returned.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  stats(): Record<string, number>;
}
