import { create } from "@bufbuild/protobuf";
import {
  GetRewardsByResourcesRequestSchema,
  GetRewardsByResourcesResponseSchema,
  GetRolloutTimelineRequestSchema,
  GetRolloutTimelineResponseSchema,
  RewardStatsSchema,
  RolloutTimelineCountSchema,
} from "../gen/agl/v1/store_pb.js";
import { RolloutStatus } from "../gen/agl/v1/types_pb.js";
import type { BucketCount, RewardGroup } from "./backend.js";
import type { StoreContext } from "./context.js";
import { invalidArgument } from "./errors.js";
import { checkTime, rolloutScope } from "./rollout-scope.js";
import type { StoreApi } from "./store-api.js";

type AggregateMethods = Pick<StoreApi, "getRolloutTimeline" | "getRewardsByResources">;

/** Buckets one timeline may have. */
const maxTimelineBuckets = 10_000;

/** The statuses whose rewards count when a request names none: finished with an outcome. */
const rewardedStatuses = [RolloutStatus.SUCCEEDED, RolloutStatus.FAILED];

/** Aggregates the dashboard reads: rollout counts over time and rewards per resources version. */
export function aggregateMethods(ctx: StoreContext): AggregateMethods {
  const { limits } = ctx;
  return {
    async getRolloutTimeline(init) {
      const req = create(GetRolloutTimelineRequestSchema, init);
      checkTime(req.startTime, "start_time");
      checkTime(req.endTime, "end_time");
      if (!(Number.isFinite(req.bucketSeconds) && req.bucketSeconds >= 0)) {
        throw invalidArgument(`bucket_seconds must be a finite number of seconds, 0 or more, got ${req.bucketSeconds}`);
      }
      if (req.startTime !== undefined && req.endTime !== undefined && !(req.endTime > req.startTime)) {
        throw invalidArgument(`end_time (${req.endTime}) must be greater than start_time (${req.startTime})`);
      }
      const scope = rolloutScope({ modeIn: req.modeIn, resourcesIdIn: req.resourcesIdIn }, limits);
      return ctx.read(async (tx) => {
        const now = ctx.now();
        // Without an end the window closes just after now, so that what happened at this very instant counts.
        const end = req.endTime ?? nextUp(now);
        const start = req.startTime ?? Math.min((await tx.firstRolloutStartTime()) ?? now, now);
        if (!(end > start)) throw invalidArgument(`start_time (${start}) is after now; give an end_time after it`);
        if (!Number.isFinite(end - start)) {
          throw invalidArgument(`the window from ${start} to ${end} is too wide to count in seconds: narrow start_time or end_time`);
        }
        const bucketSeconds = req.bucketSeconds || end - start;
        const bucketCount = Math.ceil((end - start) / bucketSeconds);
        if (bucketCount > maxTimelineBuckets) {
          throw invalidArgument(
            `a window of ${end - start} s in buckets of ${bucketSeconds} s makes ${bucketCount} buckets, more than ` +
              `${maxTimelineBuckets}: widen bucket_seconds or narrow the window`,
          );
        }
        const timeline = await tx.rolloutTimeline({ start, end, bucketSeconds, scope });
        const counts = (rows: BucketCount[]) => merge(rows, bucketCount - 1).map((row) => create(RolloutTimelineCountSchema, row));
        return create(GetRolloutTimelineResponseSchema, {
          startTime: start,
          endTime: end,
          bucketSeconds,
          bucketCount,
          created: counts(timeline.created),
          finished: counts(timeline.finished),
        });
      });
    },

    async getRewardsByResources(init) {
      const req = create(GetRewardsByResourcesRequestSchema, init);
      const scope = rolloutScope(
        {
          modeIn: req.modeIn,
          resourcesIdIn: req.resourcesIdIn,
          statusIn: req.statusIn.length > 0 ? req.statusIn : rewardedStatuses,
          startTimeFrom: req.startTimeFrom,
          startTimeTo: req.startTimeTo,
        },
        limits,
      );
      const groups = await ctx.read((tx) => tx.rewardGroups(scope));
      groups.sort(
        (a, b) =>
          a.firstStartTime - b.firstStartTime ||
          (a.resourcesId < b.resourcesId ? -1 : a.resourcesId > b.resourcesId ? 1 : 0) ||
          a.resourcesVersion - b.resourcesVersion ||
          a.mode - b.mode,
      );
      return create(GetRewardsByResourcesResponseSchema, { stats: groups.map(rewardStats) });
    },
  };
}

/**
 * Sums counts that fall in the same bucket once clamped to the last one (a time a rounding error below the window's
 * end can divide to the bucket after it), sorted by bucket, mode and status.
 */
function merge(rows: BucketCount[], last: number): BucketCount[] {
  const merged = new Map<string, BucketCount>();
  for (const row of rows) {
    const bucket = Math.min(Math.max(row.bucket, 0), last);
    const key = `${bucket}/${row.mode}/${row.status}`;
    const entry = merged.get(key);
    if (entry) entry.count += row.count;
    else merged.set(key, { ...row, bucket });
  }
  return [...merged.values()].sort((a, b) => a.bucket - b.bucket || a.mode - b.mode || a.status - b.status);
}

function rewardStats(group: RewardGroup) {
  const n = group.rewarded;
  const mean = n > 0 ? group.rewardSum / n : undefined;
  const std = mean === undefined ? undefined : Math.sqrt(Math.max(0, group.rewardSquares / n - mean * mean));
  return create(RewardStatsSchema, {
    resourcesId: group.resourcesId,
    resourcesVersion: group.resourcesVersion,
    mode: group.mode,
    rollouts: group.rollouts,
    rewarded: n,
    mean,
    std,
    min: group.rewardMin,
    max: group.rewardMax,
    llmCalls: group.llmCalls,
    promptTokens: BigInt(group.promptTokens),
    responseTokens: BigInt(group.responseTokens),
    firstStartTime: group.firstStartTime,
    lastStartTime: group.lastStartTime,
  });
}

/** The smallest double greater than `x` (finite). */
function nextUp(x: number): number {
  if (x === 0) return Number.MIN_VALUE;
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) + (x > 0 ? 1n : -1n));
  return view.getFloat64(0);
}
