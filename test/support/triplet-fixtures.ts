/** Rollouts with proxy-shaped LLM spans, claimed and finished through the store API, for triplet suites. */
import type { RolloutMode } from "../../src/gen/agl/v1/types_pb.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { llmSpan, rewardSpan, span } from "./span-factory.js";

export interface ClaimedRollout {
  rolloutId: string;
  attemptId: string;
  /** The response ids of its calls, in order (what the triplets must carry). */
  responses: number[][];
  prompts: number[][];
}

/** Enqueues `n` rollouts and claims them; each gets `calls` proxy spans and a reward span (not finished yet). */
export async function claimWithSpans(
  store: StoreApi,
  n: number,
  options: { groupId?: string; mode?: RolloutMode; calls?: number; promptLength?: number } = {},
): Promise<ClaimedRollout[]> {
  await store.enqueueRollouts({ rollouts: Array.from({ length: n }, () => ({ groupId: options.groupId ?? "", mode: options.mode ?? 0 })) });
  const { rollouts } = await store.dequeueRollouts({ workerId: "fixture", limit: n });
  const out: ClaimedRollout[] = [];
  for (const [k, r] of rollouts.entries()) {
    const rolloutId = r.rolloutId;
    const attemptId = r.latestAttempt?.attemptId as string;
    const ids = { rolloutId, attemptId };
    const prompts: number[][] = [];
    const responses: number[][] = [];
    const spans = [span({ ...ids, id: "aaaaaaaaaaaaaaaa", seq: 0 })];
    for (let c = 0; c < (options.calls ?? 2); c++) {
      const prompt = Array.from({ length: options.promptLength ?? 8 }, (_, i) => 1000 + k * 10 + c + i);
      const response = [k, c, k + c];
      prompts.push(prompt);
      responses.push(response);
      spans.push(
        llmSpan({
          ...ids,
          id: `b${c.toString().padStart(15, "0")}`,
          parent: "aaaaaaaaaaaaaaaa",
          seq: 0,
          prompt,
          response,
          logprobs: response.map(() => -0.5),
          responseId: `${rolloutId}-${c}`,
        }),
      );
    }
    spans.push(rewardSpan({ ...ids, id: "cccccccccccccccc", parent: "aaaaaaaaaaaaaaaa", seq: 0, value: k / 10 }));
    await store.addSpans({ spans });
    out.push({ rolloutId, attemptId, prompts, responses });
  }
  return out;
}

/** Marks a claimed rollout's attempt succeeded (the rollout finishes). */
export async function finish(store: StoreApi, r: ClaimedRollout, status = AttemptStatus.SUCCEEDED): Promise<void> {
  await store.updateAttempt({ rolloutId: r.rolloutId, attemptId: r.attemptId, status });
}
