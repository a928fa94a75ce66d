/**
 * The adapters (`agl/adapter`), for trainers and tools that read spans themselves: spans → trace tree (with its
 * hierarchy repaired) → LLM calls (recognized from every hook's spans) → rewards matched to calls → triplets
 * (transition or trajectory), and the messages view APO reads. The TripletService (`agl/triplets`) runs the same
 * adapter on the store's side; this is the only code that turns spans into triplets.
 *
 * @example
 * ```ts
 * import { spansToTriplets } from "agl/adapter";
 * const { triplets, finalReward, stats } = spansToTriplets(spans, { mode: "trajectory" });
 * ```
 * @module
 */
export { spansToTriplets, createTripletAdapter } from "./adapter/spans-to-triplets.js";
export type { TripletAdapter, TripletAdapterOptions, TripletRollout, AdaptedSpans } from "./adapter/spans-to-triplets.js";
export type { MismatchKind } from "./adapter/triplets.js";

/** The chat messages of every LLM call of a rollout, and its final reward. */
export { spansToMessages } from "./adapter/messages-view.js";
export type { MessagesView, CallConversation } from "./adapter/messages-view.js";
export type { ChatMessage } from "./adapter/chat-messages.js";

/** The stages, one by one. */
export { buildTraceTree } from "./adapter/trace-tree.js";
export type { TraceTree, TraceNode } from "./adapter/trace-tree.js";
export { repairHierarchy } from "./adapter/repair-hierarchy.js";
export { findLlmCalls } from "./adapter/llm-calls.js";
export type { LlmCall, FindLlmCallsOptions } from "./adapter/llm-calls.js";
export { defaultRecognizers, recognizeLlmCall, agentNameOf } from "./adapter/recognizers.js";
export type { LlmCallRecognizer } from "./adapter/recognizers.js";
export { rewardOf, matchRewards } from "./adapter/rewards.js";
export type { RewardMatchPolicy } from "./adapter/rewards.js";

/** Span names and attribute keys shared by the proxy, the tracer hooks and the adapters. */
export * as semconv from "./core/semconv.js";
