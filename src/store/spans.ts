import { create } from "@bufbuild/protobuf";
import { AddSpansRequestSchema, NextSpanSequenceIdsRequestSchema, QuerySpansRequestSchema } from "../gen/agl/v1/store_pb.js";
import { FilterLogic } from "../gen/agl/v1/types_pb.js";
import type { StringMatch } from "./backend.js";
import { pageInfo, requireRollout, type StoreContext } from "./context.js";
import { notFound } from "./errors.js";
import { allocateSequenceIds, checkSpans, storeSpans } from "./span-batch.js";
import type { StoreApi } from "./store-api.js";
import { checkCount, checkEnum, checkId, toPageSpec } from "./validate.js";

type SpanMethods = Pick<StoreApi, "addSpans" | "querySpans" | "nextSpanSequenceIds">;

const match = (exact: string, contains: string): StringMatch | undefined =>
  exact || contains ? { exact: exact || undefined, contains: contains || undefined } : undefined;

/** Spans: idempotent batches that also act as heartbeats, queries, and per-rollout sequence ids. */
export function spanMethods(ctx: StoreContext): SpanMethods {
  const { limits } = ctx;

  return {
    async addSpans(init) {
      const req = create(AddSpansRequestSchema, init);
      checkSpans(req.spans, limits);
      // An empty batch (one that only carries span promises) writes nothing, so it needs no transaction.
      const acks = req.spans.length === 0 ? [] : await ctx.write((tx) => storeSpans(tx, req.spans, ctx.now()));
      return { $typeName: "agl.v1.AddSpansResponse", acks, expectHeld: [], expectAttempts: [], holds: false };
    },

    async querySpans(init) {
      const req = create(QuerySpansRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      checkEnum(req.filterLogic, FilterLogic, "filter_logic", true);
      const page = toPageSpec(req.page, "spans", limits);
      await ctx.maybeScan();
      const result = await ctx.read(async (tx) => {
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
      const sequenceIds = await ctx.write(async (tx) => {
        const ids: number[] = [];
        for (const [i, { rolloutId }] of req.requests.entries()) {
          checkId(rolloutId, `requests[${i}].rollout_id`, limits);
          await requireRollout(tx, rolloutId);
          ids.push(await allocateSequenceIds(tx, rolloutId, 1));
        }
        return ids;
      });
      return { $typeName: "agl.v1.NextSpanSequenceIdsResponse", sequenceIds };
    },
  };
}
