import type { Attempt, Rollout } from "../gen/agl/v1/types_pb.js";
import { AttemptStatus, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import type { StorageTx } from "./backend.js";
import { deriveRolloutStatus, isAttemptFinal, isFinished, isQueued, syncWorker } from "./state-machine.js";

/**
 * Writes a rollout status with its consequences: end time, re-enqueueing for queuing/requeuing, and a "finished"
 * event for waiters. Leaving a finished status (an explicit retry) clears the end time.
 */
export async function writeRolloutStatus(tx: StorageTx, rollout: Rollout, status: RolloutStatus, now: number) {
  rollout.status = status;
  if (isFinished(status)) rollout.endTime = now;
  else rollout.endTime = undefined;
  rollout.latestAttempt = undefined;
  await tx.putRollout(rollout);
  if (isQueued(status)) {
    await tx.enqueue([rollout.rolloutId]);
    tx.notify({ kind: "queued" });
  }
  if (isFinished(status)) tx.notify({ kind: "finished", rolloutIds: [rollout.rolloutId] });
}

/** Sets an attempt's status; succeeded, failed and cancelled attempts get an end time. */
export function setAttemptStatus(attempt: Attempt, status: AttemptStatus, now: number): void {
  attempt.status = status;
  if (status === AttemptStatus.SUCCEEDED || status === AttemptStatus.FAILED || status === AttemptStatus.CANCELLED) {
    attempt.endTime = now;
  }
}

/**
 * Stores a changed attempt and propagates it: when `drivesRollout` (the rollout's latest attempt took a new status)
 * and the rollout is not finished, the rollout takes the derived status. Finished rollouts never change here (they
 * are sticky).
 */
export async function settleAttempt(tx: StorageTx, rollout: Rollout, attempt: Attempt, drivesRollout: boolean, now: number) {
  await tx.putAttempt(attempt);
  if (!drivesRollout || isFinished(rollout.status)) return;
  const derived = deriveRolloutStatus(rollout, attempt);
  if (derived !== rollout.status) await writeRolloutStatus(tx, rollout, derived, now);
}

/** Updates the worker bound to an attempt from the attempt's status. */
export async function syncAttemptWorker(tx: StorageTx, attempt: Attempt, now: number, dequeued = false) {
  if (!attempt.workerId) return;
  const worker = await tx.getWorker(attempt.workerId);
  await tx.putWorker(syncWorker(worker, attempt, now, dequeued));
}

/** Cancels the rollout's latest attempt if it can still run, so its runner learns to stop. */
export async function cancelLatestAttempt(tx: StorageTx, rolloutId: string, now: number) {
  const attempt = (await tx.latestAttempts([rolloutId])).get(rolloutId);
  if (!attempt || isAttemptFinal(attempt.status)) return;
  setAttemptStatus(attempt, AttemptStatus.CANCELLED, now);
  await tx.putAttempt(attempt);
  await syncAttemptWorker(tx, attempt, now);
}

/**
 * A span arrived for `attempt`: record the heartbeat, revive a preparing or unresponsive attempt, and mark the
 * rollout running when this is its latest, now running, attempt.
 */
export async function heartbeat(tx: StorageTx, rollout: Rollout, attempt: Attempt, isLatest: boolean, now: number) {
  attempt.lastHeartbeatTime = now;
  const revived = attempt.status === AttemptStatus.UNRESPONSIVE;
  if (attempt.status === AttemptStatus.PREPARING || revived) attempt.status = AttemptStatus.RUNNING;
  await tx.putAttempt(attempt);
  if (revived) await syncAttemptWorker(tx, attempt, now);
  const promotable = isQueued(rollout.status) || rollout.status === RolloutStatus.PREPARING || rollout.status === RolloutStatus.RUNNING;
  if (isLatest && attempt.status === AttemptStatus.RUNNING && promotable && rollout.status !== RolloutStatus.RUNNING) {
    rollout.status = RolloutStatus.RUNNING;
    rollout.latestAttempt = undefined;
    await tx.putRollout(rollout);
  }
}
