import { create } from "@bufbuild/protobuf";
import { GetLatestAttemptRequestSchema, QueryAttemptsRequestSchema, UpdateAttemptRequestSchema } from "../gen/agl/v1/store_pb.js";
import { type Attempt, AttemptStatus, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { pageInfo, requireRollout, type StoreContext } from "./context.js";
import { failedPrecondition, invalidArgument, notFound } from "./errors.js";
import { checkSpans, storeSpans } from "./span-batch.js";
import type { StoreApi } from "./store-api.js";
import { setAttemptStatus, settleAttempt, syncAttemptWorker } from "./transitions.js";
import { checkEnum, checkId, checkStruct, toPageSpec } from "./validate.js";

type AttemptMethods = Pick<StoreApi, "queryAttempts" | "getLatestAttempt" | "updateAttempt">;

/** Attempts: read them, and update one (which drives its rollout when it is the latest). */
export function attemptMethods(ctx: StoreContext): AttemptMethods {
  const { limits } = ctx;
  return {
    async queryAttempts(init) {
      const req = create(QueryAttemptsRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      const page = toPageSpec(req.page, "attempts", limits);
      await ctx.maybeScan();
      return ctx.read(async (tx) => {
        await requireRollout(tx, req.rolloutId);
        const result = await tx.queryAttempts(req.rolloutId, page);
        return {
          $typeName: "agl.v1.QueryAttemptsResponse",
          attempts: result.items,
          page: pageInfo(result.total, page),
        };
      });
    },

    async getLatestAttempt(init) {
      const req = create(GetLatestAttemptRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      await ctx.maybeScan();
      return ctx.read(async (tx) => {
        await requireRollout(tx, req.rolloutId);
        const attempt = (await tx.latestAttempts([req.rolloutId])).get(req.rolloutId);
        return { $typeName: "agl.v1.GetLatestAttemptResponse", attempt };
      });
    },

    async updateAttempt(init) {
      const req = create(UpdateAttemptRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      checkId(req.attemptId, "attempt_id", limits);
      if (req.status !== undefined) checkEnum(req.status, AttemptStatus, "status");
      if (req.workerId) checkId(req.workerId, "worker_id", limits);
      checkStruct(req.metadata, "metadata");
      checkSpans(req.spans, limits);
      for (const [i, span] of req.spans.entries()) {
        const ownAttempt = span.attemptId === req.attemptId || req.attemptId === "latest";
        if (span.rolloutId !== req.rolloutId || !ownAttempt) {
          throw invalidArgument(`spans[${i}] belongs to another rollout or attempt than the one updated`);
        }
      }
      await ctx.maybeScan();
      return ctx.write(async (tx) => {
        const now = ctx.now();
        let rollout = await requireRollout(tx, req.rolloutId);
        let latest = (await tx.latestAttempts([req.rolloutId])).get(req.rolloutId);
        if (!latest) throw notFound(`rollout ${JSON.stringify(req.rolloutId)} has no attempts`);
        if (req.spans.length > 0) {
          const latestId = latest.attemptId;
          if (req.attemptId === "latest" && req.spans.some((span) => span.attemptId !== latestId)) {
            throw invalidArgument(`spans must belong to the latest attempt (${latestId}) of rollout ${JSON.stringify(req.rolloutId)}`);
          }
          // Stored first: as heartbeats they may move the attempt and rollout, and the update applies on top.
          await storeSpans(tx, req.spans, now);
          rollout = await requireRollout(tx, req.rolloutId);
          latest = (await tx.latestAttempts([req.rolloutId])).get(req.rolloutId) as Attempt;
        }
        const attempt = req.attemptId === "latest" ? latest : await tx.getAttempt(req.rolloutId, req.attemptId);
        if (!attempt) {
          throw notFound(`attempt ${JSON.stringify(req.attemptId)} not found for rollout ${JSON.stringify(req.rolloutId)}`);
        }
        if (req.status !== undefined && req.status !== AttemptStatus.CANCELLED && attempt.status === AttemptStatus.CANCELLED) {
          const why = rollout.status === RolloutStatus.CANCELLED ? "its rollout was cancelled" : "it was cancelled";
          throw failedPrecondition(
            `attempt ${attempt.attemptId} of rollout ${req.rolloutId} stays cancelled (${why}): stop its agent; ` +
              "its spans and metadata can still be reported without a status",
          );
        }
        if (req.workerId !== undefined) attempt.workerId = req.workerId;
        if (req.lastHeartbeatTime !== undefined) attempt.lastHeartbeatTime = req.lastHeartbeatTime;
        if (req.metadata !== undefined) attempt.metadata = req.metadata;
        const before = attempt.status;
        if (req.status !== undefined) setAttemptStatus(attempt, req.status, now);
        // Only a new status moves the rollout: a heartbeat, metadata or a repeated status after a hand-back (the
        // attempt cancelled, the rollout requeuing) must not re-derive the rollout from that cancelled attempt.
        const moved = attempt.status !== before && attempt.sequenceId === latest.sequenceId;
        await settleAttempt(tx, rollout, attempt, moved, now);
        if (req.workerId || req.status !== undefined) await syncAttemptWorker(tx, attempt, now);
        return attempt;
      });
    },
  };
}
