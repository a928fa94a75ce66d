import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "../agent/logger.js";
import { AttemptStatus, RolloutStatus, type Span } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import type { AttemptEnd, AttemptOutcome } from "./attempt-task.js";
import { withRetries } from "./retry.js";

const statusOf: Record<Exclude<AttemptEnd, "interrupted">, AttemptStatus> = {
  succeeded: AttemptStatus.SUCCEEDED,
  failed: AttemptStatus.FAILED,
  timeout: AttemptStatus.TIMEOUT,
  cancelled: AttemptStatus.CANCELLED,
  lost: AttemptStatus.UNRESPONSIVE,
};
// UpdateAttempt carries at most this many spans; the rest go first through AddSpans.
const maxSpansPerUpdate = 1_000;
const finalStatuses = new Set([AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.CANCELLED]);

/** What the runner knows when an attempt ends. */
export interface FinishInput {
  rolloutId: string;
  attemptId: string;
  outcome: AttemptOutcome;
  /** The attempt's remaining spans (shipper leftovers and the agent thread's last ones). */
  spans: Span[];
  /** Spans of the attempt dropped on the way. */
  droppedSpans: number;
  /** Metadata the attempt had when claimed (kept, with `error`/`spans_dropped` added). */
  metadata: JsonObject;
  /** The store already finished the attempt (cancelled, timed out): report spans only, not a status. */
  settledByStore: boolean;
  /** How long each call is retried while the store cannot be reached, before the report is given up. */
  retryForMs: number;
  logger: Logger;
}

/**
 * Reports an attempt's end to the store in one call: its last spans and its status (with the error and dropped-span
 * count in the attempt's metadata), retried for up to `retryForMs` while the store cannot be reached (repeating the
 * update is safe: it sets the same fields, and its spans are idempotent by span id). An interrupted attempt is handed
 * back: its spans are stored and its rollout goes back to the queue (which ends the attempt at the store and frees
 * its worker), unless the store has already finished the attempt.
 */
export async function finishAttempt(store: StoreApi, input: FinishInput): Promise<void> {
  const { rolloutId, attemptId, outcome } = input;
  const retry = { forMs: input.retryForMs };
  let spans = input.spans;
  let dropped = input.droppedSpans;
  while (spans.length > maxSpansPerUpdate) {
    const chunk = spans.slice(0, maxSpansPerUpdate);
    spans = spans.slice(maxSpansPerUpdate);
    await withRetries(() => store.addSpans({ spans: chunk }), retry).catch((error) => {
      dropped += chunk.length;
      input.logger.warn(`could not store ${chunk.length} final spans of ${rolloutId} ${attemptId}: ${String(error)}`);
    });
  }
  const metadata: JsonObject = { ...input.metadata };
  if (outcome.error) {
    metadata.error = { type: outcome.error.type, message: outcome.error.message.slice(0, 4_000), ...(outcome.error.stack ? { stack: outcome.error.stack.slice(0, 4_000) } : {}) };
  }
  if (dropped > 0) metadata.spans_dropped = dropped;
  const interrupted = outcome.end === "interrupted";
  if (interrupted) metadata.handed_back = outcome.error?.message ?? "the runner shut down before the agent finished";
  let changed = outcome.error !== undefined || dropped > 0 || interrupted;
  let status = interrupted || input.settledByStore ? undefined : statusOf[outcome.end as Exclude<AttemptEnd, "interrupted">];
  const send = (withSpans: Span[]) =>
    withRetries(() =>
      store.updateAttempt({
        rolloutId,
        attemptId,
        spans: withSpans,
        ...(status === undefined ? {} : { status }),
        ...(changed ? { metadata } : {}),
      }),
      retry,
    );
  const update = async (withSpans: Span[]) => {
    try {
      return await send(withSpans);
    } catch (error) {
      // The store finished the attempt before us (its rollout was cancelled): it keeps that status; the rest still lands.
      if (status === undefined || ConnectError.from(error).code !== Code.FailedPrecondition) throw error;
      input.logger.info(`${rolloutId} ${attemptId}: ${ConnectError.from(error).rawMessage}; reporting it without a status`);
      status = undefined;
      return send(withSpans);
    }
  };
  let attempt;
  try {
    attempt = await update(spans);
  } catch (error) {
    if (spans.length === 0) throw error;
    // A span the store refuses must not keep the status from landing.
    input.logger.warn(`the final spans of ${rolloutId} ${attemptId} were refused (${String(error)}); reporting the status without them`);
    metadata.spans_dropped = dropped + spans.length;
    changed = true;
    attempt = await update([]);
  }
  if (interrupted && !finalStatuses.has(attempt.status) && attempt.status !== AttemptStatus.UNRESPONSIVE) {
    await withRetries(() => store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING }), retry);
  }
}

/** Hands a rollout claimed during shutdown back to the queue without running it. */
export async function handBackUnstarted(store: StoreApi, rolloutId: string): Promise<void> {
  await withRetries(() => store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING }));
}
