import { hostname } from "node:os";
import { ConnectError } from "@connectrpc/connect";
import { errorInfo } from "../agent/errors.js";
import { createConsoleLogger, type Logger } from "../agent/logger.js";
import type { ResourcesData } from "../agent/resources.js";
import { AttemptStatus, type Rollout } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { createSpanShipper, type SpanShipper, type SpanShipperOptions } from "../tracer/span-shipper.js";
import type { AbortKind, AttemptEnd, AttemptExecutor, AttemptHandle, AttemptOutcome } from "./attempt-task.js";
import { buildTask } from "./build-task.js";
import { finishAttempt, handBackUnstarted } from "./finish-attempt.js";
import { startHeartbeats } from "./heartbeats.js";
import { type ResourcesCache, resolveBatchResources } from "./resolve-batch.js";

/** Options of {@link createRunner}. */
export interface RunnerOptions {
  store: StoreApi;
  /** Where attempts run: `createInProcessExecutor({ agent })` or `createPoolExecutor({ agentModule, … })`. */
  executor: AttemptExecutor;
  /** How this runner appears in the store's workers. Default `{hostname}-{pid}`. */
  workerId?: string;
  /** Server-side wait of each dequeue when the queue is empty. Default 2 s. */
  pollWaitSeconds?: number;
  /** An attempt that shipped no span for this long sends a heartbeat (and learns whether it was cancelled). Default 5 s. */
  heartbeatIntervalMs?: number;
  /** Period of the worker heartbeat (`UpdateWorker` with stats). Default 10 s. */
  workerHeartbeatMs?: number;
  /** How long an aborted agent (cancellation, timeout, shutdown) gets to stop by itself. Default 5 s. */
  abortGraceMs?: number;
  /** How long `stop()` lets running attempts finish before aborting and handing them back. Default 30 s. */
  shutdownGraceMs?: number;
  /**
   * How long a fetched resources snapshot is reused for later claims (a snapshot updated under the same id reaches
   * new attempts at most this late). Default 1 s; 0 fetches for every dequeued batch.
   */
  resourcesCacheMs?: number;
  /** Stop after claiming this many rollouts (and finishing them). Default: run until `stop()`. */
  maxRollouts?: number;
  /** Spans per batch and linger in the agent's thread. Defaults 64 and 200 ms. */
  spanBatchSize?: number;
  spanFlushMs?: number;
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
  /** Runs until `stop()` (or `maxRollouts`); resolves with the counts once every claimed attempt is reported. */
  run(): Promise<RunnerSummary>;
  /**
   * Stops claiming, lets running attempts finish for `graceMs` (default `shutdownGraceMs`), then aborts the rest and
   * hands them back to the queue. Resolves when `run()` has returned.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  stats(): Record<string, number>;
}

interface Active {
  rollout: Rollout;
  attemptId: string;
  handle?: AttemptHandle;
  dispatchedAt: number;
  lastHeartbeatMs: number;
  settledByStore: boolean;
  finished: Promise<void>;
}

const keyOf = (rolloutId: string, attemptId: string) => `${rolloutId}\0${attemptId}`;
const finalFromStore: Partial<Record<AttemptStatus, AbortKind>> = {
  [AttemptStatus.CANCELLED]: "cancelled",
  [AttemptStatus.TIMEOUT]: "timeout",
  [AttemptStatus.FAILED]: "cancelled",
  [AttemptStatus.SUCCEEDED]: "cancelled",
};

/** Creates a runner. */
export function createRunner(options: RunnerOptions): Runner {
  const { store, executor } = options;
  const workerId = options.workerId ?? `${hostname()}-${process.pid}`;
  const logger = options.logger ?? createConsoleLogger({ prefix: `[${workerId}]` });
  const settings = {
    abortGraceMs: options.abortGraceMs ?? 5_000,
    spanBatchSize: options.spanBatchSize ?? 64,
    spanFlushMs: options.spanFlushMs ?? 200,
  };
  const active = new Map<string, Active>();
  const resourcesCache: ResourcesCache = new Map();
  const summary: RunnerSummary = { claimed: 0, succeeded: 0, failed: 0, timeout: 0, cancelled: 0, interrupted: 0 };
  let stopping = false;
  let running: Promise<RunnerSummary> | undefined;
  let wake: () => void = () => {};

  /** The store finished the attempt (cancelled it, timed it out): stop the agent. */
  const onStoreStatus = (rolloutId: string, attemptId: string, status: AttemptStatus) => {
    const entry = active.get(keyOf(rolloutId, attemptId));
    const kind = finalFromStore[status];
    if (!entry || !kind || entry.settledByStore) return;
    entry.settledByStore = true;
    logger.info(`${rolloutId} ${attemptId}: the store reports ${AttemptStatus[status]}; stopping the agent`);
    entry.handle?.abort(kind);
  };
  const shipper: SpanShipper = createSpanShipper({ ...options.shipper, store, logger, onAttemptStatus: onStoreStatus });

  const finish = async (entry: Active, outcome: AttemptOutcome) => {
    const { rolloutId } = entry.rollout;
    const { spans: leftovers, dropped } = await shipper.drain(rolloutId, entry.attemptId);
    const overheadMs = performance.now() - entry.dispatchedAt - outcome.agentMs;
    try {
      await finishAttempt(store, {
        rolloutId,
        attemptId: entry.attemptId,
        outcome,
        spans: [...leftovers, ...outcome.spans],
        droppedSpans: dropped,
        metadata: entry.rollout.latestAttempt?.metadata ?? {},
        settledByStore: entry.settledByStore,
        logger,
      });
    } catch (error) {
      logger.error(`could not report the end (${outcome.end}) of ${rolloutId} ${entry.attemptId}: ${String(error)}`);
    }
    summary[outcome.end]++;
    options.onAttemptEnd?.({ rolloutId, attemptId: entry.attemptId, end: outcome.end, agentMs: outcome.agentMs, overheadMs });
  };

  const start = (rollout: Rollout, resources: ResourcesData | Error) => {
    const attemptId = rollout.latestAttempt?.attemptId ?? "";
    const entry: Active = {
      rollout,
      attemptId,
      dispatchedAt: performance.now(),
      lastHeartbeatMs: Date.now(),
      settledByStore: false,
      finished: Promise.resolve(),
    };
    const key = keyOf(rollout.rolloutId, attemptId);
    active.set(key, entry);
    let done: Promise<AttemptOutcome>;
    if (resources instanceof Error) {
      done = Promise.resolve({ end: "failed", error: errorInfo(resources), spans: [], lateSpans: 0, agentMs: 0 });
    } else {
      entry.handle = executor.start(buildTask(rollout, resources, settings), (spans) => shipper.enqueue(spans));
      done = entry.handle.done.catch((error): AttemptOutcome => ({ end: "failed", error: errorInfo(error), spans: [], lateSpans: 0, agentMs: 0 }));
    }
    entry.finished = done
      .then((outcome) => finish(entry, outcome))
      .finally(() => {
        active.delete(key);
        wake();
      });
  };

  /** Resolves when a slot is free and the shipper keeps up, or when stopping. */
  const capacity = async () => {
    while (!stopping && (active.size >= executor.capacity || shipper.congested)) {
      const woken = new Promise<void>((resolve) => (wake = resolve));
      await (shipper.congested ? Promise.race([woken, shipper.whenUncongested()]) : woken);
    }
    // With most slots busy, let a few more free up (briefly) so one dequeue claims several rollouts.
    const enough = Math.max(1, Math.floor(executor.capacity / 4));
    if (!stopping && active.size > 0 && executor.capacity - active.size < enough) {
      const woken = new Promise<void>((resolve) => (wake = resolve));
      await Promise.race([woken, new Promise((resolve) => setTimeout(resolve, 5))]);
    }
  };

  const loop = async (): Promise<RunnerSummary> => {
    const heartbeats = startHeartbeats({
      store,
      workerId,
      logger,
      attemptIntervalMs: options.heartbeatIntervalMs ?? 5_000,
      workerIntervalMs: options.workerHeartbeatMs ?? 10_000,
      attempts: () => [...active.values()].filter((e) => !e.settledByStore),
      lastShippedMs: (e) => Math.max(e.lastHeartbeatMs, shipper.lastShippedMs(e.rollout.rolloutId, e.attemptId) ?? 0),
      onBeat: (e, status) => {
        e.lastHeartbeatMs = Date.now();
        onStoreStatus(e.rollout.rolloutId, e.attemptId, status);
      },
      stats: () => ({ ...stats(), ...executor.stats() }),
    });
    let failures = 0;
    try {
      while (!stopping && (options.maxRollouts === undefined || summary.claimed < options.maxRollouts)) {
        await capacity();
        if (stopping) break;
        const room = executor.capacity - active.size;
        const limit = options.maxRollouts === undefined ? room : Math.min(room, options.maxRollouts - summary.claimed);
        let rollouts: Rollout[];
        try {
          ({ rollouts } = await store.dequeueRollouts({ workerId, limit, waitSeconds: options.pollWaitSeconds ?? 2 }));
          failures = 0;
        } catch (error) {
          if (failures++ === 0) logger.warn(`dequeue failed (${ConnectError.from(error).message}); retrying`);
          await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** failures)));
          continue;
        }
        summary.claimed += rollouts.length;
        if (rollouts.length === 0) continue;
        if (stopping) {
          // Claimed while shutting down: give them back untouched.
          await Promise.all(rollouts.map((r) => handBackUnstarted(store, r.rolloutId).catch((e) => logger.error(String(e)))));
          summary.interrupted += rollouts.length;
          break;
        }
        const resources = await resolveBatchResources(store, rollouts, resourcesCache, options.resourcesCacheMs ?? 1_000);
        for (const rollout of rollouts) start(rollout, resources.get(rollout.rolloutId) as ResourcesData | Error);
      }
      while (active.size > 0) await Promise.all([...active.values()].map((e) => e.finished));
    } finally {
      heartbeats.stop();
      await shipper.flush();
    }
    return { ...summary };
  };

  const stats = () => ({
    active: active.size,
    claimed: summary.claimed,
    succeeded: summary.succeeded,
    failed: summary.failed,
    timeout: summary.timeout,
    cancelled: summary.cancelled,
    handed_back: summary.interrupted,
    ...Object.fromEntries(Object.entries(shipper.stats()).map(([k, v]) => [`spans_${k}`, v])),
  });

  return {
    workerId,
    run() {
      running ??= loop();
      return running;
    },
    async stop({ graceMs } = {}) {
      stopping = true;
      wake();
      const grace = graceMs ?? options.shutdownGraceMs ?? 30_000;
      let timer: NodeJS.Timeout | undefined;
      const allDone = Promise.all([...active.values()].map((e) => e.finished));
      await Promise.race([allDone, new Promise((resolve) => (timer = setTimeout(resolve, grace)))]);
      clearTimeout(timer);
      for (const entry of active.values()) entry.handle?.abort("shutdown");
      await running;
    },
    stats,
  };
}
