import type { Logger } from "../core/logger.js";
import type { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";

interface AttemptRef {
  rollout: { rolloutId: string };
  attemptId: string;
}

/** Options of {@link startHeartbeats}. */
export interface HeartbeatOptions<A extends AttemptRef> {
  store: StoreApi;
  workerId: string;
  logger: Logger;
  /** An attempt silent for this long (no span acknowledged, no heartbeat) gets a heartbeat. */
  attemptIntervalMs: number;
  workerIntervalMs: number;
  attempts(): A[];
  /** When the attempt last showed life at the store (epoch ms). */
  lastShippedMs(attempt: A): number;
  /** The store answered a heartbeat with the attempt's status. */
  onBeat(attempt: A, status: AttemptStatus): void;
  stats(): Record<string, number>;
}

/** The heartbeats of a runner. */
export interface Heartbeats<A> {
  /**
   * Resolves once no heartbeat of `attempt` is in flight. An attempt's end waits for it (after leaving `attempts()`),
   * so the end is the attempt's last word to the store (the store itself never lets a status-less update move a
   * handed-back rollout).
   */
  quiet(attempt: A): Promise<void>;
  /** Sends the worker's stats now (after the beat in flight, if any): what the runner does changed. */
  beatWorker(): void;
  /** Stops the heartbeats, then sends the worker's final stats; resolves once answered (or after `finalBeatMs`). */
  stop(finalBeatMs?: number): Promise<void>;
}

/**
 * Keeps the store informed while agents run. Spans are heartbeats already (each acknowledged batch refreshes its
 * attempt); an attempt that stays silent longer than `attemptIntervalMs` — an agent awaiting a slow LLM — gets an
 * explicit `UpdateAttempt(last_heartbeat_time)`, whose answer also reveals a cancellation. The worker itself sends
 * `UpdateWorker` with its stats every `workerIntervalMs`, when asked (`beatWorker`) and a last time at `stop`.
 */
export function startHeartbeats<A extends AttemptRef>(options: HeartbeatOptions<A>): Heartbeats<A> {
  const { store, logger } = options;
  const inFlight = new Map<A, Promise<void>>();
  let warned = false;
  const beatAttempts = () => {
    const now = Date.now();
    for (const attempt of options.attempts()) {
      if (inFlight.has(attempt) || now - options.lastShippedMs(attempt) < options.attemptIntervalMs) continue;
      const beat = store
        .updateAttempt({ rolloutId: attempt.rollout.rolloutId, attemptId: attempt.attemptId, lastHeartbeatTime: now / 1000 })
        .then((updated) => options.onBeat(attempt, updated.status))
        .catch((error) => {
          if (!warned) logger.warn(`attempt heartbeat failed: ${String(error)}`);
          warned = true;
        })
        .finally(() => inFlight.delete(attempt));
      inFlight.set(attempt, beat);
    }
  };
  const sendWorkerBeat = () => {
    const stats = { ...options.stats(), rss_mb: Math.round(process.memoryUsage().rss / 1048576), uptime_s: Math.round(process.uptime()) };
    return store.updateWorker({ workerId: options.workerId, heartbeatStats: stats }).then(
      () => undefined,
      (error) => logger.warn(`worker heartbeat failed: ${String(error)}`),
    );
  };
  // One worker beat at a time, each reading the stats as it is sent, so the last to land is the newest. A beat asked
  // for while one is in flight waits for it; a beat already waiting covers later requests too.
  let lastBeat: Promise<void> = Promise.resolve();
  let waiting: Promise<void> | undefined;
  const beatWorker = (): Promise<void> => {
    waiting ??= lastBeat = lastBeat.then(() => {
      waiting = undefined;
      return sendWorkerBeat();
    });
    return waiting;
  };
  beatWorker();
  const attemptTimer = setInterval(beatAttempts, Math.max(50, options.attemptIntervalMs / 2));
  const workerTimer = setInterval(beatWorker, options.workerIntervalMs);
  attemptTimer.unref();
  workerTimer.unref();
  return {
    quiet: (attempt) => inFlight.get(attempt) ?? Promise.resolve(),
    beatWorker: () => void beatWorker(),
    async stop(finalBeatMs = 2_000) {
      clearInterval(attemptTimer);
      clearInterval(workerTimer);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([beatWorker(), new Promise<void>((resolve) => (timer = setTimeout(resolve, finalBeatMs)))]);
      clearTimeout(timer);
    },
  };
}
