import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { StatisticsSchema } from "../gen/agl/v1/store_pb.js";
import { RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { aggregateMethods } from "./aggregates.js";
import { attemptMethods } from "./attempts.js";
import { createConsoleLogger, type Logger } from "../core/logger.js";
import type { StorageBackend } from "./backend.js";
import type { StoreContext } from "./context.js";
import { afterPendingWrites, createPendingWrites, type PendingWrites } from "./pending-writes.js";
import { resourceMethods } from "./resources.js";
import { rolloutMethods } from "./rollouts.js";
import { spanPromiseMethods } from "./span-promises.js";
import { spanMethods } from "./spans.js";
import type { StoreApi } from "./store-api.js";
import { defaultLimits, type StoreLimits } from "./validate.js";
import { createWaiters } from "./waiters.js";
import { withTxCache } from "./tx-cache.js";
import { DEFAULT_UNRESPONSIVE_SECONDS, DEFAULT_WORKER_GONE_SECONDS } from "./liveness.js";
import { scanOnce } from "./watchdog.js";
import { withWellFormedRequests } from "./well-formed-requests.js";
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
  let scanning: Promise<number> | undefined;

  const runWatchdog = () => {
    // One scan at a time; concurrent callers share the one in flight.
    scanning ??= scanOnce(ctx.transaction, now, watchdogDefaults).finally(() => {
      scanning = undefined;
    });
    return scanning;
  };

  const closing = new AbortController();
  const ctx: StoreContext = {
    backend,
    transaction: (fn, transactionOptions) =>
      backend.transaction(async (raw) => {
        const tx = withTxCache(raw);
        const result = await fn(tx);
        await tx.flush();
        return result;
      }, transactionOptions),
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
      await runWatchdog();
    },
  };

  const interval = options.watchdogIntervalSeconds ?? 1;
  const timer = interval > 0 ? setInterval(() => runWatchdog().catch(onError), interval * 1000).unref() : undefined;

  const pendingWrites = createPendingWrites();
  const rollouts = rolloutMethods(ctx);
  const attempts = attemptMethods(ctx);
  const spans = spanMethods(ctx);
  const ordered = afterPendingWrites(pendingWrites, { ...rollouts, ...attempts, ...spans });
  return {
    backend,
    pendingWrites,
    ...withWellFormedRequests({
      ...rollouts,
      ...attempts,
      ...spans,
      ...ordered,
      ...spanPromiseMethods(ctx, { addSpans: spans.addSpans, updateAttempt: ordered.updateAttempt, updateRollout: ordered.updateRollout }),
      ...workerMethods(ctx),
      ...resourceMethods(ctx),
      ...aggregateMethods(ctx),
    }),
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
      await scanning?.catch(() => undefined);
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
