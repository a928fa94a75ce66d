import { spansToMessages } from "../../src/adapter/messages-view.js";
import { readSnapshot } from "../../src/algorithm/apo/candidate.js";
import type { Rollout } from "../../src/gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../src/store/store-api.js";

/** The rollouts of one APO batch (group id `apo:{run}:{what}`), in enqueue order. */
export async function batchRollouts(store: StoreApi, runId: string, what: string): Promise<Rollout[]> {
  return (await store.queryRollouts({ groupId: `apo:${runId}:${what}` })).rollouts;
}

/** The mean final reward of a batch, read independently from its spans (a missing reward counts 0). */
export async function batchMean(store: StoreApi, runId: string, what: string): Promise<number> {
  const rollouts = await batchRollouts(store, runId, what);
  let sum = 0;
  for (const r of rollouts) {
    const { spans } = await store.querySpans({ rolloutId: r.rolloutId, attemptId: "latest" });
    sum += spansToMessages(spans).finalReward ?? 0;
  }
  return sum / rollouts.length;
}

/** A snapshot's template texts and APO record. */
export async function snapshot(store: StoreApi, resourcesId: string) {
  return readSnapshot(await store.getResources({ resourcesId }));
}

/** The most rollouts whose attempts overlapped in time. */
export function maxOverlap(rollouts: readonly Rollout[]): number {
  const edges: [number, number][] = [];
  for (const r of rollouts) {
    const a = r.latestAttempt;
    if (!a || a.endTime === undefined) continue;
    edges.push([a.startTime, 1], [a.endTime, -1]);
  }
  edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of edges) {
    now += d;
    max = Math.max(max, now);
  }
  return max;
}
