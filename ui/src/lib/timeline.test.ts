import { describe, expect, it } from "vitest";
import { RolloutMode, RolloutStatus } from "../../../src/gen/agl/v1/types_pb.js";
import { countsByMode, niceBucketSeconds, seriesByStatus } from "./timeline.js";

const timeline = {
  startTime: 1000,
  bucketSeconds: 60,
  bucketCount: 3,
  created: [
    { bucket: 0, mode: RolloutMode.TRAIN, status: RolloutStatus.SUCCEEDED, count: 4 },
    { bucket: 0, mode: RolloutMode.VAL, status: RolloutStatus.RUNNING, count: 1 },
    { bucket: 2, mode: RolloutMode.TRAIN, status: RolloutStatus.FAILED, count: 2 },
    { bucket: 2, mode: RolloutMode.UNSPECIFIED, status: RolloutStatus.QUEUING, count: 3 },
  ],
  finished: [
    { bucket: 1, mode: RolloutMode.TRAIN, status: RolloutStatus.SUCCEEDED, count: 3 },
    { bucket: 1, mode: RolloutMode.VAL, status: RolloutStatus.SUCCEEDED, count: 1 },
    { bucket: 2, mode: RolloutMode.TRAIN, status: RolloutStatus.FAILED, count: 2 },
  ],
};

describe("countsByMode", () => {
  it("sums every status per mode, with none for unspecified", () => {
    expect(countsByMode(timeline)).toEqual({ train: 6, val: 1, test: 0, none: 3 });
  });
});

describe("seriesByStatus", () => {
  it("gives one full series per status, modes summed, buckets at their start time", () => {
    const series = seriesByStatus(timeline, "finished");
    expect([...series.keys()]).toEqual(["succeeded", "failed"]);
    expect(series.get("succeeded")).toEqual([
      [1000, 0],
      [1060, 4],
      [1120, 0],
    ]);
    expect(series.get("failed")).toEqual([
      [1000, 0],
      [1060, 0],
      [1120, 2],
    ]);
  });
});

describe("niceBucketSeconds", () => {
  it("picks a readable width that keeps buckets under the limit", () => {
    expect(niceBucketSeconds(50)).toBe(1);
    expect(niceBucketSeconds(3600)).toBe(60);
    expect(niceBucketSeconds(86_400)).toBe(1800);
    expect(niceBucketSeconds(200 * 86_400)).toBe(4 * 86_400);
  });
});
