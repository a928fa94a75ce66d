import type { SpanAck } from "../gen/agl/v1/store_pb.js";
import type { Attempt, Rollout, Span } from "../gen/agl/v1/types_pb.js";
import { attemptKey, spanKey, type StorageTx } from "./backend.js";
import { requireRollout } from "./context.js";
import { invalidArgument, notFound, outOfRange } from "./errors.js";
import { copySpan } from "./span-wire.js";
import { heartbeat } from "./transitions.js";
import { checkCount, checkId, type StoreLimits } from "./validate.js";

interface Owner {
  rollout: Rollout;
  attempt: Attempt;
  latestSequenceId: number;
  inserted: boolean;
}

/** Sequence ids are uint32 on the wire. */
const maxSequenceId = 0xffff_ffff;

/**
 * Takes the rollout's next `count` sequence ids and returns the last. Past the largest uint32 no id can be given
 * (an explicit sequence id near it raised the counter): OUT_OF_RANGE, inside the caller's transaction, so nothing
 * changes.
 */
export async function allocateSequenceIds(tx: StorageTx, rolloutId: string, count: number): Promise<number> {
  const last = await tx.nextSequenceId(rolloutId, count);
  if (last > maxSequenceId) {
    throw outOfRange(
      `rollout ${JSON.stringify(rolloutId)} has no span sequence ids left: they end at ${maxSequenceId}, and an explicit ` +
        "sequence_id raised its counter near that; give its spans explicit sequence ids, or use another rollout",
    );
  }
  return last;
}

/** Checks a batch before any transaction: its size, and every span's ids and sequence id. */
export function checkSpans(spans: Span[], limits: StoreLimits, field = "spans"): void {
  checkCount(spans.length, limits.spansPerBatch, field);
  spans.forEach((span, i) => {
    checkId(span.rolloutId, `${field}[${i}].rollout_id`, limits);
    checkId(span.attemptId, `${field}[${i}].attempt_id`, limits);
    checkId(span.spanId, `${field}[${i}].span_id`, limits);
    // Decoded requests always hold a uint32; in-process callers can pass any number.
    const { sequenceId } = span;
    if (!Number.isInteger(sequenceId) || sequenceId < 0 || sequenceId > maxSequenceId) {
      throw invalidArgument(`${field}[${i}].sequence_id must be an integer from 0 to ${maxSequenceId}, got ${sequenceId}`);
    }
  });
}

/** Loads each (rollout, attempt) the batch refers to; any unknown one rejects the whole batch. */
async function loadOwners(tx: StorageTx, spans: Span[]): Promise<Map<string, Owner>> {
  const owners = new Map<string, Owner>();
  for (const span of spans) {
    const key = attemptKey(span.rolloutId, span.attemptId);
    if (owners.has(key)) continue;
    const rollout = await requireRollout(tx, span.rolloutId);
    const attempt = await tx.getAttempt(span.rolloutId, span.attemptId);
    if (!attempt) {
      throw notFound(`attempt ${JSON.stringify(span.attemptId)} not found for rollout ${JSON.stringify(span.rolloutId)}`);
    }
    const latest = (await tx.latestAttempts([span.rolloutId])).get(span.rolloutId) as Attempt;
    owners.set(key, { rollout, attempt, latestSequenceId: latest.sequenceId, inserted: false });
  }
  return owners;
}

/** Gives sequence ids to spans that have none, after raising counters past the explicit ones. */
async function assignSequenceIds(tx: StorageTx, spans: Span[]) {
  const explicitMax = new Map<string, number>();
  const missing = new Map<string, Span[]>();
  for (const span of spans) {
    if (span.sequenceId > 0) {
      explicitMax.set(span.rolloutId, Math.max(explicitMax.get(span.rolloutId) ?? 0, span.sequenceId));
    } else {
      const list = missing.get(span.rolloutId) ?? [];
      list.push(span);
      missing.set(span.rolloutId, list);
    }
  }
  for (const [rolloutId, max] of explicitMax) await tx.raiseSequenceId(rolloutId, max);
  for (const [rolloutId, list] of missing) {
    const last = await allocateSequenceIds(tx, rolloutId, list.length);
    list.forEach((span, i) => {
      span.sequenceId = last - list.length + 1 + i;
    });
  }
}

/**
 * Stores a checked batch inside a transaction: every (rollout, attempt) must exist or nothing is stored; spans whose
 * key is stored already (or repeated in the batch) are acknowledged as duplicates; new spans get sequence ids and
 * count as heartbeats of their attempts. Returns one ack per input span, in order.
 */
export async function storeSpans(tx: StorageTx, spans: Span[], now: number): Promise<SpanAck[]> {
  const owners = await loadOwners(tx, spans);
  const existing = await tx.existingSpans(spans.map((s) => [s.rolloutId, s.attemptId, s.spanId]));
  const keys = spans.map((span) => spanKey(span.rolloutId, span.attemptId, span.spanId));
  // A span is new unless stored already or repeated earlier in this batch (the first copy wins).
  const seen = new Map(existing);
  const fresh: Span[] = [];
  const freshKeys: string[] = [];
  const firstCopy = spans.map((span, i) => {
    const key = keys[i] as string;
    if (seen.has(key)) return false;
    seen.set(key, -1);
    // A shallow copy: sequence ids are assigned below, and the caller's message must stay as it was.
    fresh.push(copySpan(span));
    freshKeys.push(key);
    return true;
  });
  await assignSequenceIds(tx, fresh);
  // Another server sharing the database may have stored the same span meanwhile: trust the backend's answer.
  const raced = new Set<string>();
  (await tx.insertSpans(fresh)).forEach((result, j) => {
    const span = fresh[j] as Span;
    const key = freshKeys[j] as string;
    seen.set(key, result.sequenceId);
    if (result.duplicate) raced.add(key);
    else (owners.get(attemptKey(span.rolloutId, span.attemptId)) as Owner).inserted = true;
  });
  for (const owner of owners.values()) {
    if (!owner.inserted) continue;
    const isLatest = owner.attempt.sequenceId === owner.latestSequenceId;
    await heartbeat(tx, owner.rollout, owner.attempt, isLatest, now);
  }
  return spans.map(
    (span, i): SpanAck => ({
      $typeName: "agl.v1.SpanAck",
      rolloutId: span.rolloutId,
      attemptId: span.attemptId,
      spanId: span.spanId,
      sequenceId: seen.get(keys[i] as string) as number,
      duplicate: !firstCopy[i] || raced.has(keys[i] as string),
      attemptStatus: (owners.get(attemptKey(span.rolloutId, span.attemptId)) as Owner).attempt.status,
    }),
  );
}
