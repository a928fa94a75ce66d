import { create } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import { longestTimerMs } from "../core/deadline-timer.js";
import type { Attempt, PageInfo, Rollout } from "../gen/agl/v1/types_pb.js";
import { AttemptSchema, AttemptStatus } from "../gen/agl/v1/types_pb.js";
import type { PageSpec, StorageBackend, StorageTx, TransactionOptions } from "./backend.js";
import { notFound } from "./errors.js";
import { newAttemptId } from "./ids.js";
import type { StoreLimits } from "./validate.js";
import type { Waiters } from "./waiters.js";

/** What the store's method groups share. */
export interface StoreContext {
  backend: StorageBackend;
  /** A backend transaction through a per-transaction row cache (tx-cache.ts). */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** A transaction that only reads. */
  read<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T>;
  /** A transaction that writes. */
  write<T>(fn: (tx: StorageTx) => Promise<T>): Promise<T>;
  limits: StoreLimits;
  waiters: Waiters;
  /** Current time in epoch seconds. */
  now(): number;
  /** The on-call watchdog scan (debounced). */
  maybeScan(): Promise<void>;
  /** Aborted when the store closes: every wait ends. */
  closing: AbortSignal;
}

/**
 * The signal that ends a blocking call: the caller's signal, its `timeoutMs`, or the store closing. After the wait,
 * `check()` throws CANCELED or DEADLINE_EXCEEDED when the caller ended it; a closing store just ends the wait.
 */
export function callScope(ctx: StoreContext, options?: CallOptions) {
  const ms = options?.timeoutMs;
  // A deadline further off than a Node timer can wait (~24.8 days; such a timer fires at once) outlasts any wait here.
  const timeout = ms !== undefined && ms > 0 && ms <= longestTimerMs ? AbortSignal.timeout(ms) : undefined;
  const signals = [ctx.closing, options?.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
  return {
    signal: AbortSignal.any(signals),
    check() {
      if (options?.signal?.aborted) throw new ConnectError("the call was cancelled", Code.Canceled);
      if (timeout?.aborted) throw new ConnectError("the call's deadline was exceeded", Code.DeadlineExceeded);
    },
  };
}

/** Reads a rollout or fails with NOT_FOUND. */
export async function requireRollout(tx: StorageTx, rolloutId: string): Promise<Rollout> {
  const rollout = await tx.getRollout(rolloutId);
  if (!rollout) throw notFound(`rollout ${JSON.stringify(rolloutId)} not found`);
  return rollout;
}

/** Returns rollouts with their latest attempt attached. */
export async function withLatestAttempts(tx: StorageTx, rollouts: Rollout[]): Promise<Rollout[]> {
  if (rollouts.length === 0) return rollouts;
  const latest = await tx.latestAttempts(rollouts.map((r) => r.rolloutId));
  for (const rollout of rollouts) rollout.latestAttempt = latest.get(rollout.rolloutId);
  return rollouts;
}

/** A new attempt numbered after the rollout's latest one. */
export async function newAttempt(tx: StorageTx, rolloutId: string, workerId: string, now: number): Promise<Attempt> {
  const latest = (await tx.latestAttempts([rolloutId])).get(rolloutId);
  return create(AttemptSchema, {
    rolloutId,
    attemptId: newAttemptId(),
    sequenceId: (latest?.sequenceId ?? 0) + 1,
    startTime: now,
    status: AttemptStatus.PREPARING,
    workerId,
    metadata: {},
  });
}

/** The page info of a query response. */
export const pageInfo = (total: number, page: PageSpec): PageInfo => ({
  $typeName: "agl.v1.PageInfo",
  total,
  limit: page.limit,
  offset: page.offset,
});
