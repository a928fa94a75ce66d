import { rewardOf } from "../adapter/rewards.js";
import type { StoreApi } from "../store/store-api.js";

/** The final reward of a rollout's latest attempt: the reward of its last reward span (by sequence id), if any. */
export async function finalRewardOf(store: StoreApi, rolloutId: string): Promise<number | undefined> {
  const { spans } = await store.querySpans({ rolloutId, attemptId: "latest" });
  for (let i = spans.length - 1; i >= 0; i--) {
    const reward = rewardOf(spans[i] as (typeof spans)[number]);
    if (reward !== undefined) return reward;
  }
  return undefined;
}
