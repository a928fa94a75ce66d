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
  stop(): void;
}

/**
 * Keeps the store informed while agents run. Spans are heartbeats already (each acknowledged batch refreshes its
 * attempt); an attempt that stays silent longer than `attemptIntervalMs` — an agent awaiting a slow LLM — gets an
 * explicit `UpdateAttempt(last_heartbeat_time)`, whose answer also reveals a cancellation. The worker itself sends
 * `UpdateWorker` with its stats every `workerIntervalMs`.
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
  const beatWorker = () => {
    const stats = { ...options.stats(), rss_mb: Math.round(process.memoryUsage().rss / 1048576), uptime_s: Math.round(process.uptime()) };
    store.updateWorker({ workerId: options.workerId, heartbeatStats: stats }).catch((error) => {
      logger.warn(`worker heartbeat failed: ${String(error)}`);
    });
  };
  beatWorker();
  const attemptTimer = setInterval(beatAttempts, Math.max(50, options.attemptIntervalMs / 2));
  const workerTimer = setInterval(beatWorker, options.workerIntervalMs);
  attemptTimer.unref();
  workerTimer.unref();
  return {
    quiet: (attempt) => inFlight.get(attempt) ?? Promise.resolve(),
    stop() {
      clearInterval(attemptTimer);
      clearInterval(workerTimer);
    },
  };
}
