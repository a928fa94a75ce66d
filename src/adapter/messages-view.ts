import type { Span } from "../gen/agl/v1/types_pb.js";
import { type Conversation, conversationOf } from "./chat-messages.js";
import { findLlmCalls, type FindLlmCallsOptions } from "./llm-calls.js";
import { repairHierarchy } from "./repair-hierarchy.js";
import { finalReward, matchRewards, rewardFeedbackOf } from "./rewards.js";
import { buildTraceTree } from "./trace-tree.js";

/** One LLM call of a rollout as chat messages. */
export interface CallConversation extends Conversation {
  model: string;
  spanId: string;
  /** The reward matched to this call (first occurrence by sequence id), if any. */
  reward: number | undefined;
}

/** What prompt optimization reads from a rollout: every call's conversation and the final reward. */
export interface MessagesView {
  conversations: CallConversation[];
  finalReward: number | undefined;
  /** Text feedback of reward spans, in sequence order. */
  feedback: string[];
}

/** Builds the messages view of one attempt's spans (failed calls are left out). */
export function spansToMessages(spans: readonly Span[], options: FindLlmCallsOptions = {}): MessagesView {
  const tree = buildTraceTree(spans);
  repairHierarchy(tree, options.recognizers);
  const found = findLlmCalls(tree, options);
  const calls = found.calls.filter((call) => !call.failed);
  matchRewards("first_occurrence", calls, found.rewards);
  const feedback = [...found.rewards]
    .sort((a, b) => a.node.span.sequenceId - b.node.span.sequenceId)
    .map((r) => rewardFeedbackOf(r.node.span))
    .filter((text): text is string => text !== undefined);
  return {
    conversations: calls.map((call) => ({
      ...conversationOf(call.node.span),
      model: call.model,
      spanId: call.node.span.spanId,
      reward: call.reward,
    })),
    finalReward: finalReward(found.rewards),
    feedback,
  };
}
