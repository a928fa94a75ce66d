import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "../core/logger.js";
import { type Attempt, AttemptStatus, RolloutStatus, type Span } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import type { AttemptEnd, AttemptOutcome } from "./attempt-task.js";
import { isTransientStoreError, withRetries } from "../core/retry.js";

const statusOf: Record<Exclude<AttemptEnd, "interrupted">, AttemptStatus> = {
  succeeded: AttemptStatus.SUCCEEDED,
  failed: AttemptStatus.FAILED,
  timeout: AttemptStatus.TIMEOUT,
  cancelled: AttemptStatus.CANCELLED,
  lost: AttemptStatus.UNRESPONSIVE,
};
const finalStatuses = new Set([AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.CANCELLED]);

/** What the runner knows when an attempt ends. */
export interface FinishInput {
  rolloutId: string;
  attemptId: string;
  outcome: AttemptOutcome;
  /** Spans of the attempt dropped on the way (the shipper has stored the others before this is called). */
  droppedSpans: number;
  /** The attempt's last spans, stored with its end in the same call (see `SpanShipper.handOver`). */
  spans?: Span[];
  /** Stores `spans` on their own, should the store refuse them with the update; resolves to how many were dropped. */
  shipApart?(spans: Span[]): Promise<number>;
  /** Metadata the attempt had when claimed (kept, with `error`/`spans_dropped` added). */
  metadata: JsonObject;
  /** The store already finished the attempt (cancelled, timed out): report metadata only, not a status. */
  settledByStore: boolean;
  /** How long each call is retried while the store cannot be reached, before the report is given up. */
  retryForMs: number;
  logger: Logger;
}

/**
 * Reports an attempt's end to the store in one call, once the shipper has stored its earlier spans: its last spans
 * (stored first, in the same transaction), its status, with the error and dropped-span count in the attempt's
 * metadata, retried for up to `retryForMs` while the store cannot be reached (repeating the update is safe: it sets
 * the same fields, and spans are idempotent by id). An interrupted attempt is handed back: its rollout goes back to
 * the queue (which ends the attempt at the store and frees its worker), unless the store has already finished the
 * attempt.
 */
export async function finishAttempt(store: StoreApi, input: FinishInput): Promise<void> {
  const { rolloutId, attemptId, outcome } = input;
  const retry = { forMs: input.retryForMs };
  const interrupted = outcome.end === "interrupted";
  let status = interrupted || input.settledByStore ? undefined : statusOf[outcome.end as Exclude<AttemptEnd, "interrupted">];
  let spans = input.spans ?? [];
  let dropped = input.droppedSpans;
  const metadata = (): JsonObject | undefined => {
    if (outcome.error === undefined && dropped === 0 && !interrupted) return undefined;
    const metadata: JsonObject = { ...input.metadata };
    if (outcome.error) {
      metadata.error = {
        type: outcome.error.type,
        message: outcome.error.message.slice(0, 4_000),
        ...(outcome.error.stack ? { stack: outcome.error.stack.slice(0, 4_000) } : {}),
      };
    }
    if (dropped > 0) metadata.spans_dropped = dropped;
    if (interrupted) metadata.handed_back = outcome.error?.message ?? "the runner shut down before the agent finished";
    return metadata;
  };
  const send = () =>
    withRetries(() => {
      const changed = metadata();
      return store.updateAttempt({
        rolloutId,
        attemptId,
        ...(status === undefined ? {} : { status }),
        ...(changed ? { metadata: changed } : {}),
        ...(spans.length > 0 ? { spans } : {}),
      });
    }, retry);
  let attempt: Attempt | undefined;
  while (attempt === undefined) {
    try {
      attempt = await send();
    } catch (error) {
      const { code, rawMessage } = ConnectError.from(error);
      if (status !== undefined && code === Code.FailedPrecondition) {
        // The store finished the attempt before us (its rollout was cancelled): it keeps that status; the metadata still lands.
        input.logger.info(`${rolloutId} ${attemptId}: ${rawMessage}; reporting it without a status`);
        status = undefined;
      } else if (spans.length > 0 && input.shipApart && !isTransientStoreError(error)) {
        // A span the store refuses (invalid; or all of them too large together) fails the whole update: the spans go as
        // AddSpans takes them (split, a refused one dropped and counted) and the end is reported without them.
        input.logger.warn(
          `${rolloutId} ${attemptId}: the store refused the last spans with the update (${rawMessage}); sending them apart`,
        );
        dropped += await input.shipApart(spans);
        spans = [];
      } else {
        throw error;
      }
    }
  }
  if (interrupted && !finalStatuses.has(attempt.status) && attempt.status !== AttemptStatus.UNRESPONSIVE) {
    await withRetries(() => store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING }), retry);
  }
}

/** Hands a rollout claimed during shutdown back to the queue without running it. */
export async function handBackUnstarted(store: StoreApi, rolloutId: string): Promise<void> {
  await withRetries(() => store.updateRollout({ rolloutId, status: RolloutStatus.REQUEUING }));
}
