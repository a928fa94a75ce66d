import { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import type { StorageTx } from "./backend.js";
import { isAttemptFinal } from "./state-machine.js";
import { setAttemptStatus, settleAttempt, syncAttemptWorker } from "./transitions.js";

/**
 * One pass of the watchdog: for every preparing or running rollout, times out its latest attempt after
 * `timeout_seconds`, or marks it unresponsive after `unresponsive_seconds` without a heartbeat (counting from the
 * attempt's start when it never sent one). Returns how many attempts it changed.
 */
export function scanOnce(
  transaction: <T>(fn: (tx: StorageTx) => Promise<T>) => Promise<T>,
  now: () => number,
): Promise<number> {
  return transaction(async (tx) => {
    const rollouts = (await tx.activeRollouts()).filter(
      (r) => r.config?.timeoutSeconds !== undefined || r.config?.unresponsiveSeconds !== undefined,
    );
    if (rollouts.length === 0) return 0;
    const latest = await tx.latestAttempts(rollouts.map((r) => r.rolloutId));
    const t = now();
    let changed = 0;
    for (const rollout of rollouts) {
      const attempt = latest.get(rollout.rolloutId);
      if (!attempt || isAttemptFinal(attempt.status)) continue;
      const { timeoutSeconds, unresponsiveSeconds } = rollout.config ?? {};
      let status: AttemptStatus | undefined;
      if (timeoutSeconds !== undefined && t - attempt.startTime > timeoutSeconds) status = AttemptStatus.TIMEOUT;
      else if (unresponsiveSeconds !== undefined && attempt.status !== AttemptStatus.UNRESPONSIVE) {
        const since = attempt.lastHeartbeatTime ?? attempt.startTime;
        if (t - since > unresponsiveSeconds) status = AttemptStatus.UNRESPONSIVE;
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
