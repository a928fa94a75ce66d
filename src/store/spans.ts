import { create } from "@bufbuild/protobuf";
import {
  AddSpansRequestSchema,
  NextSpanSequenceIdsRequestSchema,
  QuerySpansRequestSchema,
  type SpanAck,
} from "../gen/agl/v1/store_pb.js";
import { type Attempt, FilterLogic, type Rollout, type Span } from "../gen/agl/v1/types_pb.js";
import type { StorageTx, StringMatch } from "./backend.js";
import { pageInfo, requireRollout, type StoreContext } from "./context.js";
import { notFound } from "./errors.js";
import type { StoreApi } from "./store-api.js";
import { heartbeat } from "./transitions.js";
import { checkCount, checkEnum, checkId, toPageSpec } from "./validate.js";

type SpanMethods = Pick<StoreApi, "addSpans" | "querySpans" | "nextSpanSequenceIds">;

const keyOf = (rolloutId: string, attemptId: string, spanId: string) => `${rolloutId}\0${attemptId}\0${spanId}`;

const match = (exact: string, contains: string): StringMatch | undefined =>
  exact || contains ? { exact: exact || undefined, contains: contains || undefined } : undefined;

interface Owner {
  rollout: Rollout;
  attempt: Attempt;
  latestSequenceId: number;
  inserted: boolean;
}

/** Spans: idempotent batches that also act as heartbeats, queries, and per-rollout sequence ids. */
export function spanMethods(ctx: StoreContext): SpanMethods {
  const { backend, limits } = ctx;

  /** Loads each (rollout, attempt) the batch refers to; any unknown one rejects the whole batch. */
  async function loadOwners(tx: StorageTx, spans: Span[]): Promise<Map<string, Owner>> {
    const owners = new Map<string, Owner>();
    for (const span of spans) {
      const key = `${span.rolloutId}\0${span.attemptId}`;
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
      const last = await tx.nextSequenceId(rolloutId, list.length);
      list.forEach((span, i) => {
        span.sequenceId = last - list.length + 1 + i;
      });
    }
  }

  return {
    async addSpans(init) {
      const req = create(AddSpansRequestSchema, init);
      checkCount(req.spans.length, limits.spansPerBatch, "spans");
      req.spans.forEach((span, i) => {
        checkId(span.rolloutId, `spans[${i}].rollout_id`, limits);
        checkId(span.attemptId, `spans[${i}].attempt_id`, limits);
        checkId(span.spanId, `spans[${i}].span_id`, limits);
      });
      const acks = await backend.transaction(async (tx) => {
        const now = ctx.now();
        const owners = await loadOwners(tx, req.spans);
        const existing = await tx.existingSpans(req.spans.map((s) => [s.rolloutId, s.attemptId, s.spanId]));
        // A span is new unless stored already or repeated earlier in this batch (the first copy wins).
        const seen = new Map(existing);
        const fresh: Span[] = [];
        const firstCopy = req.spans.map((span) => {
          const key = keyOf(span.rolloutId, span.attemptId, span.spanId);
          if (seen.has(key)) return false;
          seen.set(key, -1);
          // A shallow copy: sequence ids are assigned below, and the caller's message must stay as it was.
          fresh.push({ ...span });
          return true;
        });
        await assignSequenceIds(tx, fresh);
        // Another server sharing the database may have stored the same span meanwhile: trust the backend's answer.
        const raced = new Set<string>();
        (await tx.insertSpans(fresh)).forEach((result, j) => {
          const span = fresh[j] as Span;
          const key = keyOf(span.rolloutId, span.attemptId, span.spanId);
          seen.set(key, result.sequenceId);
          if (result.duplicate) raced.add(key);
          else (owners.get(`${span.rolloutId}\0${span.attemptId}`) as Owner).inserted = true;
        });
        for (const owner of owners.values()) {
          if (!owner.inserted) continue;
          const isLatest = owner.attempt.sequenceId === owner.latestSequenceId;
          await heartbeat(tx, owner.rollout, owner.attempt, isLatest, now);
        }
        return req.spans.map(
          (span, i): SpanAck => ({
            $typeName: "agl.v1.SpanAck",
            rolloutId: span.rolloutId,
            attemptId: span.attemptId,
            spanId: span.spanId,
            sequenceId: seen.get(keyOf(span.rolloutId, span.attemptId, span.spanId)) as number,
            duplicate: !firstCopy[i] || raced.has(keyOf(span.rolloutId, span.attemptId, span.spanId)),
            attemptStatus: (owners.get(`${span.rolloutId}\0${span.attemptId}`) as Owner).attempt.status,
          }),
        );
      });
      return { $typeName: "agl.v1.AddSpansResponse", acks };
    },

    async querySpans(init) {
      const req = create(QuerySpansRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      checkEnum(req.filterLogic, FilterLogic, "filter_logic", true);
      const page = toPageSpec(req.page, "spans", limits);
      await ctx.maybeScan();
      const result = await backend.transaction(async (tx) => {
        await requireRollout(tx, req.rolloutId);
        let attemptId: string | undefined = req.attemptId || undefined;
        if (attemptId === "latest") {
          attemptId = (await tx.latestAttempts([req.rolloutId])).get(req.rolloutId)?.attemptId;
          if (!attemptId) return { items: [], total: 0 };
        } else if (attemptId && !(await tx.getAttempt(req.rolloutId, attemptId))) {
          throw notFound(`attempt ${JSON.stringify(attemptId)} not found for rollout ${JSON.stringify(req.rolloutId)}`);
        }
        const filter = {
          rolloutId: req.rolloutId,
          attemptId,
          afterSequenceId: req.afterSequenceId || undefined,
          traceId: match(req.traceId, req.traceIdContains),
          spanId: match(req.spanId, req.spanIdContains),
          parentId: match(req.parentId, req.parentIdContains),
          name: match(req.name, req.nameContains),
          any: req.filterLogic === FilterLogic.OR,
        };
        return tx.querySpans(filter, page);
      });
      return { $typeName: "agl.v1.QuerySpansResponse", spans: result.items, page: pageInfo(result.total, page) };
    },

    async nextSpanSequenceIds(init) {
      const req = create(NextSpanSequenceIdsRequestSchema, init);
      checkCount(req.requests.length, limits.spansPerBatch, "sequence id requests");
      const sequenceIds = await backend.transaction(async (tx) => {
        const ids: number[] = [];
        for (const [i, { rolloutId }] of req.requests.entries()) {
          checkId(rolloutId, `requests[${i}].rollout_id`, limits);
          await requireRollout(tx, rolloutId);
          ids.push(await tx.nextSequenceId(rolloutId, 1));
        }
        return ids;
      });
      return { $typeName: "agl.v1.NextSpanSequenceIdsResponse", sequenceIds };
    },
  };
}
