import type { Span } from "../gen/agl/v1/types_pb.js";
import { attrJson, attrNumber, attrString } from "./attributes.js";
import { AGL_ANNOTATION, AGL_OPERATION, AGL_OPERATION_NAME, AGL_REWARD, AGL_REWARD_FEEDBACK, rewardValueKey } from "../core/semconv.js";
import type { TraceNode } from "./trace-tree.js";

const agentOpsOutputs = ["agentops.task.output", "agentops.entity.output"];

/** Every attribute {@link rewardOf} reads (with the span's name). */
export const rewardAttributes: readonly string[] = [rewardValueKey(0), ...agentOpsOutputs, "reward"];

/**
 * The reward a span carries, or undefined. Formats, first match wins: agl / Agent Lightning v0.3
 * (`agentlightning.reward.0.value`, dimension 0 is the primary reward), AgentOps (`agentops.task.output` or
 * `agentops.entity.output` holding `{"type": "reward", "value": …}`), and v0.2 (`reward` on an annotation span).
 */
export function rewardOf(span: Pick<Span, "name" | "attributes">): number | undefined {
  const a = span.attributes;
  const primary = attrNumber(a, rewardValueKey(0));
  if (primary !== undefined) return primary;
  for (const key of agentOpsOutputs) {
    const out = attrJson(a, key) as { type?: unknown; value?: unknown } | undefined;
    if (out && out.type === "reward" && typeof out.value === "number") return out.value;
  }
  if (span.name === AGL_ANNOTATION) return attrNumber(a, "reward");
  return undefined;
}

/** Text feedback attached to a reward span, if any. */
export function rewardFeedbackOf(span: Span): string | undefined {
  return attrString(span.attributes, AGL_REWARD_FEEDBACK);
}

/** Whether LLM calls under this span compute a reward (an LLM judge) rather than act. */
export function isRewardScope(span: Span): boolean {
  if (span.name === AGL_REWARD) return true;
  if (span.name === AGL_OPERATION && attrString(span.attributes, AGL_OPERATION_NAME) === AGL_REWARD) return true;
  return rewardOf(span) !== undefined;
}

/** A reward span in the tree. */
export interface RewardNode {
  node: TraceNode;
  value: number;
}

/** The rollout's final reward: the reward span with the highest sequence id. */
export function finalReward(rewards: readonly RewardNode[]): number | undefined {
  let best: RewardNode | undefined;
  for (const r of rewards) if (!best || r.node.span.sequenceId >= best.node.span.sequenceId) best = r;
  return best?.value;
}

/** How rewards are matched to calls. */
export type RewardMatchPolicy = "first_occurrence" | "first_sibling" | "final";

/** A call as the matcher sees it. */
export interface MatchableCall {
  node: TraceNode;
  reward?: number;
}

/**
 * Gives rewards to calls by sequence id (never by clock): in ascending order, each reward goes to the latest call
 * recorded before it that has none yet (`first_sibling`: only calls under the same parent). `final` gives every
 * call the final reward. Mutates `calls[i].reward`; returns how many rewards found no call.
 */
export function matchRewards(policy: RewardMatchPolicy, calls: MatchableCall[], rewards: readonly RewardNode[]): number {
  if (policy === "final") {
    const value = finalReward(rewards);
    for (const call of calls) call.reward = value;
    return 0;
  }
  const bySeq = [...calls].sort((a, b) => a.node.span.sequenceId - b.node.span.sequenceId);
  const ordered = [...rewards].sort((a, b) => a.node.span.sequenceId - b.node.span.sequenceId);
  let unmatched = 0;
  for (const reward of ordered) {
    const seq = reward.node.span.sequenceId;
    let taken = false;
    for (let i = bySeq.length - 1; i >= 0; i--) {
      const call = bySeq[i] as MatchableCall;
      if (call.node.span.sequenceId >= seq || call.reward !== undefined) continue;
      if (policy === "first_sibling" && call.node.parent !== reward.node.parent) continue;
      call.reward = reward.value;
      taken = true;
      break;
    }
    if (!taken) unmatched++;
  }
  return unmatched;
}
