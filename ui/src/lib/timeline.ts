import type { RolloutMode, RolloutStatus } from "../../../src/gen/agl/v1/types_pb.js";
import { ROLLOUT_MODE_NAMES, type RolloutModeName, rolloutModeName, rolloutStatusName } from "./names.js";

/** What the charts need of a GetRolloutTimeline answer (the generated response has these fields). */
export interface TimelineLike {
  startTime: number;
  bucketSeconds: number;
  bucketCount: number;
  created: readonly TimelineCountLike[];
  finished: readonly TimelineCountLike[];
}
export interface TimelineCountLike {
  bucket: number;
  mode: RolloutMode;
  status: RolloutStatus;
  count: number;
}

/** Rollout counts by mode over the whole window (every status). */
export function countsByMode(timeline: Pick<TimelineLike, "created">): Record<RolloutModeName, number> {
  const out = Object.fromEntries(ROLLOUT_MODE_NAMES.map((m) => [m, 0])) as Record<RolloutModeName, number>;
  for (const c of timeline.created) out[rolloutModeName(c.mode)] += c.count;
  return out;
}

/** One series per status over the buckets: `[bucket start (epoch s), count]`, every bucket present. */
export function seriesByStatus(timeline: TimelineLike, which: "created" | "finished"): Map<string, [number, number][]> {
  const out = new Map<string, [number, number][]>();
  const width = Math.max(0, timeline.bucketSeconds);
  for (const c of timeline[which]) {
    const status = rolloutStatusName(c.status);
    let series = out.get(status);
    if (series === undefined) {
      series = Array.from({ length: timeline.bucketCount }, (_, i): [number, number] => [timeline.startTime + i * width, 0]);
      out.set(status, series);
    }
    const point = series[c.bucket];
    if (point !== undefined) point[1] += c.count;
  }
  return out;
}

/** A bucket width that splits `rangeSeconds` into at most `maxBuckets`, rounded to a readable unit. */
export function niceBucketSeconds(rangeSeconds: number, maxBuckets = 60): number {
  const steps = [1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400];
  return steps.find((s) => rangeSeconds / s <= maxBuckets) ?? Math.ceil(rangeSeconds / maxBuckets / 86_400) * 86_400;
}
