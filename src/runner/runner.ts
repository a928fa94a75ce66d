import { hostname } from "node:os";
import { ConnectError } from "@connectrpc/connect";
import { errorInfo } from "../core/errors.js";
import { createConsoleLogger } from "../core/logger.js";
import { backoffMs, sleep } from "../core/retry.js";
import type { ResourcesData } from "../agent/resources.js";
import { AttemptStatus, type Rollout } from "../gen/agl/v1/types_pb.js";
import { RUNNER_HEARTBEAT_SECONDS } from "../store/liveness.js";
import { createSpanShipper, type SpanShipper } from "../tracer/span-shipper.js";
import { type AbortKind, type AttemptHandle, type AttemptOutcome, unranOutcome } from "./attempt-task.js";
import { buildTask } from "./build-task.js";
import { finishAttempt, handBackUnstarted } from "./finish-attempt.js";
import { type Heartbeats, startHeartbeats } from "./heartbeats.js";
import { type ResourcesCache, resolveBatchResources } from "./resolve-batch.js";
import type { Runner, RunnerOptions, RunnerSummary } from "./runner-options.js";

export type { AttemptEndEvent, Runner, RunnerOptions, RunnerSummary } from "./runner-options.js";

interface Active {
  rollout: Rollout;
  attemptId: string;
  handle?: AttemptHandle;
  dispatchedAt: number;
  lastHeartbeatMs: number;
  settledByStore: boolean;
  /** The agent is done and its end is being reported: no more heartbeats. */
  ending?: boolean;
  finished: Promise<void>;
}

const keyOf = (rolloutId: string, attemptId: string) => `${rolloutId}\0${attemptId}`;
const finalFromStore: Partial<Record<AttemptStatus, AbortKind>> = {
  [AttemptStatus.CANCELLED]: "cancelled",
  [AttemptStatus.TIMEOUT]: "timeout",
  [AttemptStatus.FAILED]: "cancelled",
  [AttemptStatus.SUCCEEDED]: "cancelled",
};

/** How long a runner stays without work before it tells the store (see `idleSoon`). */
const IDLE_BEAT_MS = 250;

/** Creates a runner. */
export function createRunner(options: RunnerOptions): Runner {
  const { store, executor } = options;
  const workerId = options.workerId ?? `${hostname()}-${process.pid}`;
  const logger = options.logger ?? createConsoleLogger({ prefix: `[${workerId}]` });
  const settings = {
    abortGraceMs: options.abortGraceMs ?? 5_000,
    spanBatchSize: options.spanBatchSize ?? 64,
    spanFlushMs: options.spanFlushMs ?? 200,
    ...(options.proxyApiKey ? { proxyApiKey: options.proxyApiKey } : {}),
  };
  const retryForMs = options.retryForMs ?? 300_000;
  const heartbeatMs = options.heartbeatIntervalMs ?? RUNNER_HEARTBEAT_SECONDS * 1000;
  const active = new Map<string, Active>();
  const resourcesCache: ResourcesCache = new Map();
  const summary: RunnerSummary = { claimed: 0, succeeded: 0, failed: 0, timeout: 0, cancelled: 0, interrupted: 0, lost: 0 };
  let stopping = false;
  let running: Promise<RunnerSummary> | undefined;
  let wake: () => void = () => {};
  let claimingEnded!: () => void;
  const claimingDone = new Promise<void>((resolve) => (claimingEnded = resolve));

  /** The store finished the attempt (cancelled it, timed it out): stop the agent. */
  const onStoreStatus = (rolloutId: string, attemptId: string, status: AttemptStatus) => {
    const entry = active.get(keyOf(rolloutId, attemptId));
    const kind = finalFromStore[status];
    if (!entry || !kind || entry.settledByStore) return;
    entry.settledByStore = true;
    logger.info(`${rolloutId} ${attemptId}: the store reports ${AttemptStatus[status]}; stopping the agent`);
    entry.handle?.abort(kind);
  };
  let heartbeats: Heartbeats<Active> | undefined;
  /**
   * The work ran out: the store's view of this worker must not keep the stats of when it was busy until the next
   * periodic beat. Sent once the runner stayed idle a moment, so a runner going from one rollout to the next sends none.
   */
  let idleTimer: NodeJS.Timeout | undefined;
  const idleSoon = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      if (active.size === 0) heartbeats?.beatWorker();
    }, IDLE_BEAT_MS).unref();
  };
  const shipper: SpanShipper = createSpanShipper({ retryForMs, ...options.shipper, store, logger, onAttemptStatus: onStoreStatus });

  const finish = async (entry: Active, outcome: AttemptOutcome) => {
    const { rolloutId } = entry.rollout;
    entry.ending = true;
    await heartbeats?.quiet(entry);
    const { dropped, spans } = await shipper.handOver(rolloutId, entry.attemptId, outcome.spans);
    const overheadMs = performance.now() - entry.dispatchedAt - outcome.agentMs;
    try {
      await finishAttempt(store, {
        rolloutId,
        attemptId: entry.attemptId,
        outcome,
        droppedSpans: dropped,
        spans,
        shipApart: async (refused) => (await shipper.settle(rolloutId, entry.attemptId, refused)).dropped,
        metadata: entry.rollout.latestAttempt?.metadata ?? {},
        settledByStore: entry.settledByStore,
        retryForMs,
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
      done = Promise.resolve(unranOutcome("failed", errorInfo(resources)));
    } else {
      entry.handle = executor.start(buildTask(rollout, resources, settings), (spans) => shipper.enqueue(spans));
      done = entry.handle.done.catch((error) => unranOutcome("failed", errorInfo(error)));
    }
    entry.finished = done
      .then((outcome) => finish(entry, outcome))
      .finally(() => {
        active.delete(key);
        if (active.size === 0) idleSoon();
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
      await Promise.race([woken, sleep(5)]);
    }
  };

  const loop = async (): Promise<RunnerSummary> => {
    // Claim nothing before the agent can run: a claimed rollout would wait (and look unresponsive) meanwhile.
    await executor.ready?.();
    heartbeats = startHeartbeats({
      store,
      workerId,
      logger,
      attemptIntervalMs: heartbeatMs,
      workerIntervalMs: options.workerHeartbeatMs ?? heartbeatMs,
      attempts: () => [...active.values()].filter((e) => !e.settledByStore && !e.ending),
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
          await sleep(backoffMs(failures + 1, 100, 5_000));
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
      claimingEnded();
      while (active.size > 0) await Promise.all([...active.values()].map((e) => e.finished));
    } finally {
      claimingEnded();
      await shipper.flush();
      clearTimeout(idleTimer);
      await heartbeats.stop();
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
    lost: summary.lost,
    ...Object.fromEntries(Object.entries(shipper.stats()).map(([k, v]) => [`spans_${k}`, v])),
  });

  return {
    workerId,
    run() {
      if (!running) {
        // The process stays up while the runner runs. Its background timers are unref'd (the span shipper's retries
        // among them: a tracer must not hold its process open), so while the store is out of reach an attempt waiting
        // for its spans to be delivered could otherwise be all that is left, and the process would exit mid-retry.
        const keepAlive = setInterval(() => {}, 2 ** 30);
        running = loop().finally(() => clearInterval(keepAlive));
      }
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
      // A dequeue still waiting server-side would claim the rollouts handed back below: let it return first.
      if (running) await claimingDone;
      for (const entry of active.values()) entry.handle?.abort("shutdown");
      // run() reports its own failure to its caller.
      await running?.catch(() => {});
    },
    stats,
  };
}
