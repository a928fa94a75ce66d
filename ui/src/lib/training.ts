import type { RolloutMode } from "../../../src/gen/agl/v1/types_pb.js";

/** What the training charts need of a RewardStats row (the generated message has these fields). */
export interface RewardStatsLike {
  resourcesVersion: number;
  mode: RolloutMode;
  rollouts: number;
  rewarded: number;
  mean?: number | undefined;
  std?: number | undefined;
  llmCalls: number;
  promptTokens: bigint;
  responseTokens: bigint;
  firstStartTime: number;
}

/** One point per resources version, in version order. */
export interface VersionPoint {
  version: number;
  /** Creation time of the version's first rollout, epoch seconds. */
  time: number;
  rollouts: number;
  mean?: number;
  std?: number;
  promptTokensPerCall?: number;
  responseTokensPerCall?: number;
}

/**
 * The stats of one mode as points by version (several rows of one version, from other snapshot ids, are not
 * expected: the caller asks for one snapshot id). Tokens per call are left out for versions without LLM calls.
 */
export function pointsByVersion(stats: readonly RewardStatsLike[], mode: RolloutMode): VersionPoint[] {
  return stats
    .filter((s) => s.mode === mode)
    .map((s) => {
      const point: VersionPoint = { version: s.resourcesVersion, time: s.firstStartTime, rollouts: s.rollouts };
      if (s.rewarded > 0 && s.mean !== undefined) {
        point.mean = s.mean;
        point.std = s.std ?? 0;
      }
      if (s.llmCalls > 0) {
        point.promptTokensPerCall = Number(s.promptTokens) / s.llmCalls;
        point.responseTokensPerCall = Number(s.responseTokens) / s.llmCalls;
      }
      return point;
    })
    .sort((a, b) => a.version - b.version);
}

/** The mean and a mean ± std band as series data: `[x, y]` pairs, for a line and a stacked area between bounds. */
export function bandSeries(points: readonly VersionPoint[], x: (p: VersionPoint) => number) {
  const rewarded = points.filter((p) => p.mean !== undefined);
  return {
    mean: rewarded.map((p) => [x(p), p.mean as number]),
    lower: rewarded.map((p) => [x(p), (p.mean as number) - (p.std ?? 0)]),
    /** The band's height above `lower`, for a stacked area. */
    spread: rewarded.map((p) => [x(p), 2 * (p.std ?? 0)]),
  };
}
