import { type Attempt, AttemptStatus, type Rollout, RolloutStatus, WorkerStatus } from "../gen/agl/v1/types_pb.js";
import type { StorageTx } from "./backend.js";
import type { Deadlines } from "./deadlines.js";
import { isAttemptFinal } from "./state-machine.js";
import { setAttemptStatus, settleAttempt, syncAttemptWorker } from "./transitions.js";

/** The watchdog's defaults for what rollouts and workers do not say themselves (0 or undefined: none). */
export interface WatchdogDefaults {
  /** `unresponsive_seconds` of rollouts whose config sets none. */
  unresponsiveSeconds?: number;
  /** A worker with no heartbeat for this long is gone: marked unknown, its running attempts unresponsive. */
  workerGoneSeconds?: number;
}

/** The rollouts the watchdog acts on: preparing or running. */
const isActive = (rollout: Rollout) => rollout.status === RolloutStatus.PREPARING || rollout.status === RolloutStatus.RUNNING;

/**
 * One full pass of the watchdog. Workers whose heartbeats stopped are marked unknown (gone). Then, for every preparing
 * or running rollout, its latest attempt times out after `timeout_seconds`, or is marked unresponsive after
 * `unresponsive_seconds` (the store's default when the config sets none) without a heartbeat — counting from the
 * attempt's start when it never sent one — or at once when its worker is gone. Returns how many attempts it changed.
 * With `deadlines`, they are rebuilt: when each active rollout is next due.
 */
export function scanOnce(
  transaction: <T>(fn: (tx: StorageTx) => Promise<T>) => Promise<T>,
  now: () => number,
  defaults: WatchdogDefaults = {},
  deadlines?: Deadlines,
): Promise<number> {
  return transaction(async (tx) => {
    const t = now();
    const gone = await markGoneWorkers(tx, t, defaults.workerGoneSeconds);
    const rollouts = (await tx.activeRollouts()).filter((r) => gone.size > 0 || hasDeadline(r, defaults));
    deadlines?.clear();
    return checkRollouts(tx, rollouts, t, defaults, gone, deadlines);
  });
}

/**
 * The watchdog's pass between full ones: only the rollouts `deadlines` says are due (and the workers, few, whose
 * heartbeats stopped; any gone makes it a full pass). What it reads grows with what is due, not with what is active.
 */
export function scanDue(
  transaction: <T>(fn: (tx: StorageTx) => Promise<T>) => Promise<T>,
  now: () => number,
  defaults: WatchdogDefaults,
  deadlines: Deadlines,
): Promise<number> {
  // Taken once: a transaction body may run again (a retry), and the heap gives each due rollout once.
  let due: string[] | undefined;
  return transaction(async (tx) => {
    const t = now();
    const gone = await markGoneWorkers(tx, t, defaults.workerGoneSeconds);
    if (gone.size > 0) {
      deadlines.clear();
      return checkRollouts(tx, await tx.activeRollouts(), t, defaults, gone, deadlines);
    }
    const rollouts: Rollout[] = [];
    due ??= deadlines.takeDue(t);
    for (const id of due) {
      const rollout = await tx.getRollout(id);
      if (rollout && isActive(rollout) && hasDeadline(rollout, defaults)) rollouts.push(rollout);
    }
    return checkRollouts(tx, rollouts, t, defaults, gone, deadlines);
  });
}

/**
 * When the watchdog must next look at a rollout whose latest attempt is `attempt`: its timeout or the end of its
 * silence allowance, whichever comes first; undefined when neither applies (a finished attempt, no limits).
 */
export function deadlineOf(rollout: Rollout, attempt: Attempt, defaults: WatchdogDefaults): number | undefined {
  if (isAttemptFinal(attempt.status)) return undefined;
  const timeoutSeconds = rollout.config?.timeoutSeconds;
  const unresponsiveSeconds = rollout.config?.unresponsiveSeconds ?? (defaults.unresponsiveSeconds || undefined);
  let at = timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : attempt.startTime + timeoutSeconds;
  if (unresponsiveSeconds !== undefined && attempt.status !== AttemptStatus.UNRESPONSIVE) {
    at = Math.min(at, (attempt.lastHeartbeatTime ?? attempt.startTime) + unresponsiveSeconds);
  }
  return Number.isFinite(at) ? at : undefined;
}

const hasDeadline = (r: Rollout, defaults: WatchdogDefaults) =>
  !!defaults.unresponsiveSeconds || r.config?.timeoutSeconds !== undefined || r.config?.unresponsiveSeconds !== undefined;

async function checkRollouts(
  tx: StorageTx,
  rollouts: Rollout[],
  t: number,
  defaults: WatchdogDefaults,
  gone: Set<string>,
  deadlines: Deadlines | undefined,
): Promise<number> {
  if (rollouts.length === 0) return 0;
  const fallbackUnresponsive = defaults.unresponsiveSeconds || undefined;
  const latest = await tx.latestAttempts(rollouts.map((r) => r.rolloutId));
  let changed = 0;
  for (const rollout of rollouts) {
    const attempt = latest.get(rollout.rolloutId);
    if (!attempt || isAttemptFinal(attempt.status)) continue;
    const timeoutSeconds = rollout.config?.timeoutSeconds;
    const unresponsiveSeconds = rollout.config?.unresponsiveSeconds ?? fallbackUnresponsive;
    let status: AttemptStatus | undefined;
    if (timeoutSeconds !== undefined && t - attempt.startTime > timeoutSeconds) status = AttemptStatus.TIMEOUT;
    else if (attempt.status !== AttemptStatus.UNRESPONSIVE && (gone.has(attempt.workerId) || silentFor(attempt, t, unresponsiveSeconds))) {
      status = AttemptStatus.UNRESPONSIVE;
    }
    if (status === undefined) {
      const at = deadlineOf(rollout, attempt, defaults);
      if (at !== undefined) deadlines?.schedule(rollout.rolloutId, at);
      continue;
    }
    setAttemptStatus(attempt, status, t);
    await settleAttempt(tx, rollout, attempt, true, t);
    await syncAttemptWorker(tx, attempt, t);
    // Its next attempt, if any, is scheduled as it is written; an unresponsive one may still time out.
    const at = deadlineOf(rollout, attempt, defaults);
    if (at !== undefined) deadlines?.schedule(rollout.rolloutId, at);
    changed++;
  }
  return changed;
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
