import { create } from "@bufbuild/protobuf";
import {
  GetLatestAttemptRequestSchema,
  QueryAttemptsRequestSchema,
  UpdateAttemptRequestSchema,
} from "../gen/agl/v1/store_pb.js";
import { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import { pageInfo, requireRollout, type StoreContext } from "./context.js";
import { notFound } from "./errors.js";
import type { StoreApi } from "./store-api.js";
import { setAttemptStatus, settleAttempt, syncAttemptWorker } from "./transitions.js";
import { checkEnum, checkId, toPageSpec } from "./validate.js";

type AttemptMethods = Pick<StoreApi, "queryAttempts" | "getLatestAttempt" | "updateAttempt">;

/** Attempts: read them, and update one (which drives its rollout when it is the latest). */
export function attemptMethods(ctx: StoreContext): AttemptMethods {
  const { backend, limits } = ctx;
  return {
    async queryAttempts(init) {
      const req = create(QueryAttemptsRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      const page = toPageSpec(req.page, "attempts", limits);
      await ctx.maybeScan();
      return backend.transaction(async (tx) => {
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
      return backend.transaction(async (tx) => {
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
      await ctx.maybeScan();
      return backend.transaction(async (tx) => {
        const now = ctx.now();
        const rollout = await requireRollout(tx, req.rolloutId);
        const latest = (await tx.latestAttempts([req.rolloutId])).get(req.rolloutId);
        if (!latest) throw notFound(`rollout ${JSON.stringify(req.rolloutId)} has no attempts`);
        const attempt = req.attemptId === "latest" ? latest : await tx.getAttempt(req.rolloutId, req.attemptId);
        if (!attempt) {
          throw notFound(`attempt ${JSON.stringify(req.attemptId)} not found for rollout ${JSON.stringify(req.rolloutId)}`);
        }
        if (req.workerId !== undefined) attempt.workerId = req.workerId;
        if (req.lastHeartbeatTime !== undefined) attempt.lastHeartbeatTime = req.lastHeartbeatTime;
        if (req.metadata !== undefined) attempt.metadata = req.metadata;
        if (req.status !== undefined) setAttemptStatus(attempt, req.status, now);
        await settleAttempt(tx, rollout, attempt, attempt.sequenceId === latest.sequenceId, now);
        if (req.workerId || req.status !== undefined) await syncAttemptWorker(tx, attempt, now);
        return attempt;
      });
    },
  };
}
