import { describe, expect, it } from "vitest";
import { RolloutMode } from "../../../src/gen/agl/v1/types_pb.js";
import { bandSeries, pointsByVersion, type RewardStatsLike } from "./training.js";

const row = (version: number, mode: RolloutMode, mean: number | undefined, extra: Partial<RewardStatsLike> = {}): RewardStatsLike => ({
  resourcesVersion: version,
  mode,
  rollouts: 8,
  rewarded: mean === undefined ? 0 : 8,
  mean,
  std: mean === undefined ? undefined : 0.1,
  llmCalls: 0,
  promptTokens: 0n,
  responseTokens: 0n,
  firstStartTime: 1000 + version,
  ...extra,
});

describe("pointsByVersion", () => {
  it("keeps one mode, in version order, with tokens per call", () => {
    const points = pointsByVersion(
      [
        row(2, RolloutMode.TRAIN, 0.5, { llmCalls: 4, promptTokens: 400n, responseTokens: 40n }),
        row(1, RolloutMode.TRAIN, 0.25),
        row(1, RolloutMode.VAL, 0.3),
      ],
      RolloutMode.TRAIN,
    );
    expect(points).toEqual([
      { version: 1, time: 1001, rollouts: 8, mean: 0.25, std: 0.1 },
      { version: 2, time: 1002, rollouts: 8, mean: 0.5, std: 0.1, promptTokensPerCall: 100, responseTokensPerCall: 10 },
    ]);
  });

  it("leaves the mean out for versions without rewards", () => {
    expect(pointsByVersion([row(1, RolloutMode.VAL, undefined)], RolloutMode.VAL)).toEqual([{ version: 1, time: 1001, rollouts: 8 }]);
  });
});

describe("bandSeries", () => {
  it("gives mean, lower bound and band height per rewarded point", () => {
    const band = bandSeries(
      [
        { version: 1, time: 0, rollouts: 1, mean: 0.5, std: 0.1 },
        { version: 2, time: 0, rollouts: 1 },
      ],
      (p) => p.version,
    );
    expect(band.mean).toEqual([[1, 0.5]]);
    expect(band.lower[0]?.[1]).toBeCloseTo(0.4);
    expect(band.spread[0]?.[1]).toBeCloseTo(0.2);
  });
});
