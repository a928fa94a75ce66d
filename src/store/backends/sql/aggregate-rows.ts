import type { RolloutMode, RolloutStatus } from "../../../gen/agl/v1/types_pb.js";
import type { BucketCount, RewardGroup } from "../../backend.js";

/** Rows of the aggregate statements (sql-aggregates.ts), as either driver returns them, turned into the backend's types. */

export type SqlRow = Record<string, unknown>;

const num = (value: unknown) => Number(value ?? 0);
const optional = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));

export const bucketCount = (row: SqlRow): BucketCount => ({
  bucket: num(row.bucket),
  mode: num(row.mode) as RolloutMode,
  status: num(row.status) as RolloutStatus,
  count: num(row.n),
});

const groupKey = (row: SqlRow) => JSON.stringify([row.resources_id, num(row.resources_version), num(row.mode)]);

/** Joins the reward rows and the token rows of the same groups (every token group has a reward row). */
export function rewardGroups(rewardRows: SqlRow[], tokenRows: SqlRow[]): RewardGroup[] {
  const tokens = new Map(tokenRows.map((row) => [groupKey(row), row]));
  return rewardRows.map((row) => {
    const t = tokens.get(groupKey(row));
    return {
      resourcesId: row.resources_id as string,
      resourcesVersion: num(row.resources_version),
      mode: num(row.mode) as RolloutMode,
      rollouts: num(row.rollouts),
      rewarded: num(row.rewarded),
      rewardSum: num(row.reward_sum),
      rewardSquares: num(row.reward_squares),
      rewardMin: optional(row.reward_min),
      rewardMax: optional(row.reward_max),
      llmCalls: num(t?.calls),
      promptTokens: num(t?.prompt_tokens),
      responseTokens: num(t?.response_tokens),
      firstStartTime: num(row.first_start),
      lastStartTime: num(row.last_start),
    };
  });
}

export function finalRewards(rows: SqlRow[]): Map<string, number> {
  const result = new Map<string, number>();
  for (const row of rows) if (row.reward !== null && row.reward !== undefined) result.set(row.rollout_id as string, Number(row.reward));
  return result;
}
