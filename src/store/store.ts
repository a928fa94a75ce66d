import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { StatisticsSchema } from "../gen/agl/v1/store_pb.js";
import { type Attempt, type Rollout, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { aggregateMethods } from "./aggregates.js";
import { attemptMethods } from "./attempts.js";
import { createConsoleLogger, type Logger } from "../core/logger.js";
import type { StorageBackend } from "./backend.js";
import type { StoreContext } from "./context.js";
import { afterPendingWrites, createPendingWrites, type PendingWrites } from "./pending-writes.js";
import { resourceMethods } from "./resources.js";
import { rolloutMethods } from "./rollouts.js";
import { type AddSpansFrom, spanPromiseMethods } from "./span-promises.js";
import { spanMethods } from "./spans.js";
import type { StoreApi } from "./store-api.js";
import { defaultLimits, type StoreLimits } from "./validate.js";
import { createWaiters } from "./waiters.js";
import { withTxCache } from "./tx-cache.js";
import { DEFAULT_UNRESPONSIVE_SECONDS, DEFAULT_WORKER_GONE_SECONDS } from "./liveness.js";
import { createDeadlines } from "./deadlines.js";
import { deadlineOf, scanDue, scanOnce } from "./watchdog.js";
import { withWellFormedRequests } from "./well-formed-requests.js";
import { addSpansStreamMethod } from "./add-spans-stream.js";
import { workerMethods } from "./workers.js";
import { useNodeTextEncoding } from "../encoding/node-text-encoding.js";

export interface StoreOptions {
  /** Where data lives: `createMemoryBackend()`, `createSqliteBackend({ path })`, … */
  backend: StorageBackend;
  /** Clock in epoch seconds; injectable for tests. */
  now?: () => number;
  /** Minimum seconds between watchdog scans made at the start of calls (default 10; 0 scans on every call). */
  scanDebounceSeconds?: number;
  /** Period of the background watchdog in seconds (default 1; 0 disables the timer). */
  watchdogIntervalSeconds?: number;
  /**
   * Seconds between the background watchdog's full passes over every active rollout (default 10). Between them it
   * looks only at the rollouts due: those whose attempts this process wrote, at their deadlines. The full passes find
   * what it could not have scheduled: attempts started by another server on the same database, or before a restart.
   */
  watchdogFullScanSeconds?: number;
  /** Request bounds; each missing one keeps its default. */
  limits?: Partial<StoreLimits>;
  /**
   * `unresponsive_seconds` of rollouts whose config sets none (default {@link DEFAULT_UNRESPONSIVE_SECONDS}: six
   * missed runner heartbeats; 0: none).
   */
  defaultUnresponsiveSeconds?: number;
  /**
   * A worker with no heartbeat for this long is gone: the watchdog marks it unknown and its running attempts
   * unresponsive (default {@link DEFAULT_WORKER_GONE_SECONDS}; 0: never).
   */
  workerGoneSeconds?: number;
  /** Where the store reports the watchdog's failures and failing event listeners (default: stderr, `[store]`). */
  logger?: Logger;
}

/** The store: the state machine of docs/store-semantics.md over a storage backend. */
export interface Store extends StoreApi {
  readonly backend: StorageBackend;
  addSpans: AddSpansFrom;
  /**
   * Writes started in this process and not yet finished (the span of an LLM call the proxy already answered):
   * `updateAttempt`, `updateRollout` and `querySpans` of a rollout wait for that rollout's. (Spans promised by other
   * processes, `expectSpans`, hold only the updates that finish an attempt or a rollout.)
   */
  readonly pendingWrites: PendingWrites;
  /** Runs one watchdog pass now; resolves to the number of attempts it timed out or marked unresponsive. */
  runWatchdog(): Promise<number>;
  /** Stops the watchdog, ends waits, and closes the backend. */
  close(): Promise<void>;
}

/** Creates a store over `options.backend`. */
export function createStore(options: StoreOptions): Store {
  useNodeTextEncoding();
  const { backend } = options;
  const now = options.now ?? (() => Date.now() / 1000);
  const debounce = options.scanDebounceSeconds ?? 10;
  const logger = options.logger ?? createConsoleLogger({ prefix: "[store]" });
  const onError = logWatchdogError(logger);
  const startedAt = now();
  const watchdogDefaults = {
    unresponsiveSeconds: options.defaultUnresponsiveSeconds ?? DEFAULT_UNRESPONSIVE_SECONDS,
    workerGoneSeconds: options.workerGoneSeconds ?? DEFAULT_WORKER_GONE_SECONDS,
  };
  let lastScan: number | undefined;
  const interval = options.watchdogIntervalSeconds ?? 1;
  const fullScanSeconds = options.watchdogFullScanSeconds ?? 10;
  // When each rollout this process knows of is next due; filled as attempts are written and by full passes.
  const deadlines = interval > 0 ? createDeadlines() : undefined;
  let lastFullScan = Number.NEGATIVE_INFINITY;
  let scanning: { full: boolean; promise: Promise<number> } | undefined;

  /** One pass at a time; a caller shares the one in flight unless it asks for a full pass and that one is not. */
  const pass = (full: boolean): Promise<number> => {
    if (scanning && (scanning.full || !full)) return scanning.promise;
    const before = scanning?.promise.catch(() => 0);
    const run = () =>
      full ? scanOnce(ctx.transaction, now, watchdogDefaults, deadlines) : scanDue(ctx.transaction, now, watchdogDefaults, deadlines!);
    const promise = (before ? before.then(run) : run()).finally(() => {
      if (scanning?.promise === promise) scanning = undefined;
    });
    scanning = { full, promise };
    if (full) lastFullScan = now();
    return promise;
  };
  const runWatchdog = () => pass(true);
  const tick = () => pass(!deadlines || now() - lastFullScan >= fullScanSeconds);
  /** After a commit: schedules the rollouts whose attempts it wrote (the latest written of each). */
  const track = (written: Map<string, { attempt: Attempt; rollout: Rollout | undefined }>) => {
    for (const [rolloutId, { attempt, rollout }] of written) {
      // Without its rollout at hand (config unknown), look at it on the next pass, which schedules it exactly.
      // A finished attempt leaves its entry: the rollout may have a newer one, and the check at that time, which
      // reads the latest attempt, drops a finished rollout.
      const at = rollout ? deadlineOf(rollout, attempt, watchdogDefaults) : now();
      if (at !== undefined) deadlines?.schedule(rolloutId, at);
    }
  };

  const closing = new AbortController();
  const ctx: StoreContext = {
    backend,
    async transaction(fn, transactionOptions) {
      const written = new Map<string, { attempt: Attempt; rollout: Rollout | undefined }>();
      const observe = (attempt: Attempt, rollout: Rollout | undefined) => {
        const seen = written.get(attempt.rolloutId);
        if (!seen || attempt.sequenceId >= seen.attempt.sequenceId) written.set(attempt.rolloutId, { attempt, rollout });
      };
      const result = await backend.transaction(async (raw) => {
        written.clear(); // a retried transaction starts over
        const tx = withTxCache(raw, deadlines && observe);
        const value = await fn(tx);
        await tx.flush();
        return value;
      }, transactionOptions);
      if (written.size > 0) track(written);
      return result;
    },
    read: (fn) => ctx.transaction(fn, { readOnly: true }),
    write: (fn) => ctx.transaction(fn, { readOnly: false }),
    closing: closing.signal,
    limits: { ...defaultLimits, ...options.limits },
    waiters: createWaiters(backend, logger),
    now,
    async maybeScan() {
      const t = now();
      if (lastScan !== undefined && t - lastScan < debounce) return;
      lastScan = t;
      // With deadlines kept, the pass at a call's start is the timer's: what is due, or a full one when that is due.
      await tick();
    },
  };

  const timer = interval > 0 ? setInterval(() => tick().catch(onError), interval * 1000).unref() : undefined;

  const pendingWrites = createPendingWrites();
  const rollouts = rolloutMethods(ctx);
  const attempts = attemptMethods(ctx);
  const spans = spanMethods(ctx);
  const ordered = afterPendingWrites(pendingWrites, { ...rollouts, ...attempts, ...spans });
  const methods = withWellFormedRequests({
    ...rollouts,
    ...attempts,
    ...spans,
    ...ordered,
    ...spanPromiseMethods(ctx, { addSpans: spans.addSpans, updateAttempt: ordered.updateAttempt, updateRollout: ordered.updateRollout }),
    ...workerMethods(ctx),
    ...resourceMethods(ctx),
    ...aggregateMethods(ctx),
  });
  return {
    backend,
    pendingWrites,
    ...methods,
    addSpansStream: addSpansStreamMethod(methods.addSpans),
    async getStatistics() {
      const counts = await ctx.read((tx) => tx.counts());
      const byStatus: Record<string, number> = {};
      for (const [status, count] of counts.rolloutsByStatus) byStatus[`ROLLOUT_STATUS_${RolloutStatus[status]}`] = count;
      return create(StatisticsSchema, {
        backend: backend.name,
        totalRollouts: counts.rollouts,
        totalAttempts: counts.attempts,
        totalSpans: counts.spans,
        totalResources: counts.resources,
        totalWorkers: counts.workers,
        queueLength: counts.queueLength,
        uptimeSeconds: now() - startedAt,
        rolloutsByStatus: byStatus,
      });
    },
    runWatchdog,
    async close() {
      if (timer) clearInterval(timer);
      closing.abort();
      ctx.waiters.close();
      await scanning?.promise.catch(() => undefined);
      await backend.close();
    },
  };
}

/**
 * The default watchdog error log. While the database is unreachable every scan fails the same way: say so once per
 * minute, briefly, rather than a stack trace every second.
 */
function logWatchdogError(logger: Logger): (error: unknown) => void {
  let lastUnavailable = Number.NEGATIVE_INFINITY;
  return (error) => {
    if (error instanceof ConnectError && error.code === Code.Unavailable) {
      if (Date.now() - lastUnavailable < 60_000) return;
      lastUnavailable = Date.now();
      logger.warn(`watchdog paused, storage unavailable: ${error.rawMessage}`);
      return;
    }
    logger.error("watchdog failed", error);
  };
}
