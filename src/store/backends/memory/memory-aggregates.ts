import type { Attempt, Rollout, Span } from "../../../gen/agl/v1/types_pb.js";
import type { BucketCount, RewardGroup, RolloutScope, TimeRange, Timeline, TimelineQuery } from "../../backend.js";
import { factsOf } from "../../span-wire.js";

/** The memory backend's aggregates: plain loops over its maps (the SQL backends do the same in GROUP BY queries). */

/** What the aggregates read of the memory backend. */
export interface MemoryTables {
  rollouts: ReadonlyMap<string, Rollout>;
  attempts: ReadonlyMap<string, readonly Attempt[]>;
  spans: ReadonlyMap<string, readonly Span[]>;
}

/** Like SQL: an unset time is outside every range that has a bound. */
const inRange = (value: number | undefined, range: TimeRange | undefined) => {
  if (range?.from === undefined && range?.to === undefined) return true;
  return value !== undefined && (range.from === undefined || value >= range.from) && (range.to === undefined || value < range.to);
};

/** Whether a rollout is inside a scope (every restriction holds). */
export function inScope(r: Rollout, scope: RolloutScope | undefined): boolean {
  if (!scope) return true;
  if (scope.statusIn?.length && !scope.statusIn.includes(r.status)) return false;
  if (scope.modeIn?.length && !scope.modeIn.includes(r.mode)) return false;
  if (scope.resourcesIdIn?.length && !scope.resourcesIdIn.includes(r.resourcesId)) return false;
  if (scope.resourcesVersion !== undefined && r.resourcesVersion !== scope.resourcesVersion) return false;
  return inRange(r.startTime, scope.startTime) && inRange(r.endTime, scope.endTime);
}

export function rolloutTimeline(tables: MemoryTables, query: TimelineQuery): Timeline {
  const created = new Map<string, BucketCount>();
  const finished = new Map<string, BucketCount>();
  const window = { from: query.start, to: query.end };
  const count = (into: Map<string, BucketCount>, r: Rollout, time: number) => {
    const bucket = Math.floor((time - query.start) / query.bucketSeconds);
    const key = `${bucket}/${r.mode}/${r.status}`;
    const entry = into.get(key) ?? into.set(key, { bucket, mode: r.mode, status: r.status, count: 0 }).get(key)!;
    entry.count++;
  };
  for (const r of tables.rollouts.values()) {
    if (!inScope(r, query.scope)) continue;
    if (inRange(r.startTime, window)) count(created, r, r.startTime);
    if (r.endTime !== undefined && inRange(r.endTime, window)) count(finished, r, r.endTime);
  }
  return { created: [...created.values()], finished: [...finished.values()] };
}

/** The reward span with the highest sequence id of the rollout's latest attempt. */
export function finalReward(tables: MemoryTables, rolloutId: string): number | undefined {
  let latest: Attempt | undefined;
  for (const attempt of tables.attempts.get(rolloutId) ?? []) if (!latest || attempt.sequenceId > latest.sequenceId) latest = attempt;
  if (!latest) return undefined;
  let best: { seq: number; value: number } | undefined;
  for (const span of tables.spans.get(rolloutId) ?? []) {
    if (span.attemptId !== latest.attemptId || (best && span.sequenceId <= best.seq)) continue;
    const { reward } = factsOf(span);
    if (reward !== null) best = { seq: span.sequenceId, value: reward };
  }
  return best?.value;
}

export function rewardGroups(tables: MemoryTables, scope: RolloutScope): RewardGroup[] {
  const groups = new Map<string, RewardGroup>();
  for (const r of tables.rollouts.values()) {
    if (!inScope(r, scope)) continue;
    const key = JSON.stringify([r.resourcesId, r.resourcesVersion, r.mode]);
    let group = groups.get(key);
    if (!group) {
      group = {
        resourcesId: r.resourcesId,
        resourcesVersion: r.resourcesVersion,
        mode: r.mode,
        rollouts: 0,
        rewarded: 0,
        rewardSum: 0,
        rewardSquares: 0,
        llmCalls: 0,
        promptTokens: 0,
        responseTokens: 0,
        firstStartTime: r.startTime,
        lastStartTime: r.startTime,
      };
      groups.set(key, group);
    }
    group.rollouts++;
    group.firstStartTime = Math.min(group.firstStartTime, r.startTime);
    group.lastStartTime = Math.max(group.lastStartTime, r.startTime);
    const reward = finalReward(tables, r.rolloutId);
    if (reward !== undefined) {
      group.rewarded++;
      group.rewardSum += reward;
      group.rewardSquares += reward * reward;
      group.rewardMin = Math.min(group.rewardMin ?? reward, reward);
      group.rewardMax = Math.max(group.rewardMax ?? reward, reward);
    }
    // Spans of a rollout with the same call key record one call (the SQL backends keep the largest counts too).
    const calls = new Map<string, { prompt: number; response: number }>();
    for (const span of tables.spans.get(r.rolloutId) ?? []) {
      const { promptTokens, responseTokens, llmCallKey: key } = factsOf(span);
      if (responseTokens === null || key === null) continue;
      const call = calls.get(key);
      if (call) {
        call.prompt = Math.max(call.prompt, promptTokens ?? 0);
        call.response = Math.max(call.response, responseTokens);
      } else calls.set(key, { prompt: promptTokens ?? 0, response: responseTokens });
    }
    group.llmCalls += calls.size;
    for (const call of calls.values()) {
      group.promptTokens += call.prompt;
      group.responseTokens += call.response;
    }
  }
  return [...groups.values()];
}
