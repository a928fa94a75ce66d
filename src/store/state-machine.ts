import { create } from "@bufbuild/protobuf";
import {
  type Attempt,
  AttemptStatus,
  type Rollout,
  RolloutStatus,
  type Worker,
  WorkerSchema,
  WorkerStatus,
} from "../gen/agl/v1/types_pb.js";
import { INFRASTRUCTURE_ATTEMPTS } from "./liveness.js";

const finishedRollout = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);
const queuedRollout = new Set([RolloutStatus.QUEUING, RolloutStatus.REQUEUING]);
const finishedAttempt = new Set([AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.CANCELLED]);

/** Succeeded, failed or cancelled: terminal, and sticky against implicit transitions. */
export const isFinished = (status: RolloutStatus) => finishedRollout.has(status);
/** Queuing or requeuing: waiting in the queue. */
export const isQueued = (status: RolloutStatus) => queuedRollout.has(status);
/** An attempt that no heartbeat revives. Unresponsive is not final: a span brings it back. */
export const isAttemptFinal = (status: AttemptStatus) => finishedAttempt.has(status);

/** The rollout status implied by its latest attempt (docs/store-semantics.md, "derived"). */
export function deriveRolloutStatus(rollout: Rollout, attempt: Attempt): RolloutStatus {
  switch (attempt.status) {
    case AttemptStatus.PREPARING:
      return RolloutStatus.PREPARING;
    case AttemptStatus.RUNNING:
      return RolloutStatus.RUNNING;
    case AttemptStatus.SUCCEEDED:
      return RolloutStatus.SUCCEEDED;
    case AttemptStatus.CANCELLED:
      return RolloutStatus.CANCELLED;
    case AttemptStatus.FAILED:
    case AttemptStatus.TIMEOUT:
    case AttemptStatus.UNRESPONSIVE: {
      const config = rollout.config;
      const condition = config?.retryCondition ?? [];
      // With no retry policy of its own, a rollout still survives infrastructure failures (not its agent's).
      const retry =
        condition.length === 0
          ? attempt.status === AttemptStatus.UNRESPONSIVE && attempt.sequenceId < INFRASTRUCTURE_ATTEMPTS
          : condition.includes(attempt.status) && attempt.sequenceId < (config?.maxAttempts || 1);
      return retry ? RolloutStatus.REQUEUING : RolloutStatus.FAILED;
    }
    default:
      return rollout.status;
  }
}

/** Applies a worker update implied by an attempt's status (docs/store-semantics.md, "Worker synchronisation"). */
export function syncWorker(existing: Worker | undefined, attempt: Attempt, now: number, dequeued: boolean): Worker {
  const worker = existing ?? create(WorkerSchema, { workerId: attempt.workerId, status: WorkerStatus.UNKNOWN });
  switch (attempt.status) {
    case AttemptStatus.PREPARING:
    case AttemptStatus.RUNNING:
      worker.status = WorkerStatus.BUSY;
      worker.lastBusyTime = now;
      worker.currentRolloutId = attempt.rolloutId;
      worker.currentAttemptId = attempt.attemptId;
      break;
    default:
      worker.status =
        attempt.status === AttemptStatus.TIMEOUT || attempt.status === AttemptStatus.UNRESPONSIVE
          ? WorkerStatus.UNKNOWN
          : WorkerStatus.IDLE;
      worker.lastIdleTime = now;
      worker.currentRolloutId = "";
      worker.currentAttemptId = "";
  }
  if (dequeued) worker.lastDequeueTime = now;
  return worker;
}

/** An empty dequeue: the worker is idle (the reference keeps its current ids; so do we). */
export function markWorkerIdle(existing: Worker | undefined, workerId: string, now: number): Worker {
  const worker = existing ?? create(WorkerSchema, { workerId, status: WorkerStatus.UNKNOWN });
  if (worker.status !== WorkerStatus.IDLE) {
    worker.status = WorkerStatus.IDLE;
    worker.lastIdleTime = now;
  }
  worker.lastDequeueTime = now;
  return worker;
}
