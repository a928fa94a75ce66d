import { type Attempt, AttemptStatus, WorkerStatus } from "../gen/agl/v1/types_pb.js";
import type { StorageTx } from "./backend.js";
import { isAttemptFinal } from "./state-machine.js";
import { setAttemptStatus, settleAttempt, syncAttemptWorker } from "./transitions.js";

/** The watchdog's defaults for what rollouts and workers do not say themselves (0 or undefined: none). */
export interface WatchdogDefaults {
  /** `unresponsive_seconds` of rollouts whose config sets none. */
  unresponsiveSeconds?: number;
  /** A worker with no heartbeat for this long is gone: marked unknown, its running attempts unresponsive. */
  workerGoneSeconds?: number;
}

/**
 * One pass of the watchdog. Workers whose heartbeats stopped are marked unknown (gone). Then, for every preparing or
 * running rollout, its latest attempt times out after `timeout_seconds`, or is marked unresponsive after
 * `unresponsive_seconds` (the store's default when the config sets none) without a heartbeat — counting from the
 * attempt's start when it never sent one — or at once when its worker is gone. Returns how many attempts it changed.
 */
export function scanOnce(
  transaction: <T>(fn: (tx: StorageTx) => Promise<T>) => Promise<T>,
  now: () => number,
  defaults: WatchdogDefaults = {},
): Promise<number> {
  return transaction(async (tx) => {
    const t = now();
    const gone = await markGoneWorkers(tx, t, defaults.workerGoneSeconds);
    const fallbackUnresponsive = defaults.unresponsiveSeconds || undefined;
    const rollouts = (await tx.activeRollouts()).filter(
      (r) =>
        gone.size > 0 ||
        fallbackUnresponsive !== undefined ||
        r.config?.timeoutSeconds !== undefined ||
        r.config?.unresponsiveSeconds !== undefined,
    );
    if (rollouts.length === 0) return 0;
    const latest = await tx.latestAttempts(rollouts.map((r) => r.rolloutId));
    let changed = 0;
    for (const rollout of rollouts) {
      const attempt = latest.get(rollout.rolloutId);
      if (!attempt || isAttemptFinal(attempt.status)) continue;
      const timeoutSeconds = rollout.config?.timeoutSeconds;
      const unresponsiveSeconds = rollout.config?.unresponsiveSeconds ?? fallbackUnresponsive;
      let status: AttemptStatus | undefined;
      if (timeoutSeconds !== undefined && t - attempt.startTime > timeoutSeconds) status = AttemptStatus.TIMEOUT;
      else if (
        attempt.status !== AttemptStatus.UNRESPONSIVE &&
        (gone.has(attempt.workerId) || silentFor(attempt, t, unresponsiveSeconds))
      ) {
        status = AttemptStatus.UNRESPONSIVE;
      }
      if (status === undefined) continue;
      setAttemptStatus(attempt, status, t);
      await settleAttempt(tx, rollout, attempt, true, t);
      await syncAttemptWorker(tx, attempt, t);
      changed++;
    }
    return changed;
  });
}

const silentFor = (attempt: Attempt, t: number, seconds: number | undefined) =>
  seconds !== undefined && t - (attempt.lastHeartbeatTime ?? attempt.startTime) > seconds;

/** Marks workers that heartbeat no more as unknown; returns their ids. Workers that never sent a heartbeat are left alone. */
async function markGoneWorkers(tx: StorageTx, t: number, goneSeconds: number | undefined): Promise<Set<string>> {
  const gone = new Set<string>();
  if (!goneSeconds) return gone;
  const { items } = await tx.queryWorkers(
    { statusIn: [WorkerStatus.BUSY, WorkerStatus.IDLE], any: false },
    { descending: false, limit: -1, offset: 0 },
  );
  for (const worker of items) {
    if (worker.lastHeartbeatTime === undefined || t - worker.lastHeartbeatTime <= goneSeconds) continue;
    gone.add(worker.workerId);
    worker.status = WorkerStatus.UNKNOWN;
    worker.currentRolloutId = "";
    worker.currentAttemptId = "";
    await tx.putWorker(worker);
  }
  return gone;
}
