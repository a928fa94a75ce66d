import type { Triplet, TripletStats } from "../gen/agl/v1/triplets_pb.js";
import type { Rollout, Span } from "../gen/agl/v1/types_pb.js";
import { findLlmCalls } from "./llm-calls.js";
import type { LlmCallRecognizer } from "./recognizers.js";
import { repairHierarchy } from "./repair-hierarchy.js";
import { finalReward, matchRewards, type RewardMatchPolicy } from "./rewards.js";
import { buildTraceTree } from "./trace-tree.js";
import { buildTrajectories, buildTransitions, hasTokenIds, type TripletContext } from "./triplets.js";

/** Options of {@link spansToTriplets}. */
export interface TripletAdapterOptions {
  /** `transition` (default): one sample per call; `trajectory`: prefix-continuous calls merged. */
  mode?: "transition" | "trajectory";
  /** Default `first_occurrence`. */
  rewardMatch?: RewardMatchPolicy;
  /** Only calls whose nearest enclosing agent's name contains this text. */
  agentNameContains?: string;
  /** Keep LLM calls made inside reward computations (dropped by default). */
  includeCallsInReward?: boolean;
  /** Re-parent calls under the agent span enclosing them in time (default true). */
  repairHierarchy?: boolean;
  /** The adapter table (default: agl, gen_ai, Vercel AI SDK, OpenAI Agents JS, LangChain.js). */
  recognizers?: readonly LlmCallRecognizer[];
}

/** The rollout the spans belong to: what they do not say themselves (group, the rollout's resources snapshot). */
export type TripletRollout = Pick<Rollout, "groupId" | "resourcesId">;

/** The triplets of one attempt's spans, as the `agl.v1` messages the `TripletService` sends. */
export interface AdaptedSpans {
  triplets: Triplet[];
  /** The last reward span's value, if any. */
  finalReward: number | undefined;
  /** Counters of the adaptation; `mismatches` only in trajectory mode. */
  stats: TripletStats;
}

/**
 * Turns one attempt's spans into training samples: builds the trace tree (sequence-id order), repairs the
 * hierarchy, finds and deduplicates LLM calls, matches rewards, and builds transition or trajectory samples from the
 * recorded token ids only. This is the only code that turns spans into triplets; every consumer (the
 * `TripletService`, the Python trainers through it) reads its output.
 */
export function spansToTriplets(
  spans: readonly Span[],
  options: TripletAdapterOptions = {},
  rollout: TripletRollout = { groupId: "", resourcesId: "" },
): AdaptedSpans {
  const tree = buildTraceTree(spans);
  if (options.repairHierarchy ?? true) repairHierarchy(tree, options.recognizers);
  const found = findLlmCalls(tree, {
    ...(options.agentNameContains === undefined ? {} : { agentNameContains: options.agentNameContains }),
    ...(options.includeCallsInReward === undefined ? {} : { includeCallsInReward: options.includeCallsInReward }),
    ...(options.recognizers === undefined ? {} : { recognizers: options.recognizers }),
  });
  let failedCalls = 0;
  for (const call of found.calls) if (call.failed) failedCalls++;
  const usable = found.calls.filter(hasTokenIds);
  const unmatchedRewards = matchRewards(options.rewardMatch ?? "first_occurrence", usable, found.rewards);
  const context: TripletContext = { groupId: rollout.groupId, resourcesId: rollout.resourcesId, finalReward: finalReward(found.rewards) };
  const build = options.mode === "trajectory" ? buildTrajectories(usable, context) : buildTransitions(usable, context);
  return {
    triplets: build.triplets,
    finalReward: context.finalReward,
    stats: {
      $typeName: "agl.v1.TripletStats",
      spans: spans.length,
      llmCalls: found.calls.length,
      duplicateCalls: found.duplicates,
      callsWithoutTokenIds: found.calls.length - usable.length - failedCalls,
      failedCalls,
      mismatches: build.mismatches,
      unmatchedRewards,
      logprobMismatches: build.logprobMismatches,
    },
  };
}

/** A reusable adapter with fixed options: `adapter.adapt(spans)`. */
export interface TripletAdapter {
  readonly options: Readonly<TripletAdapterOptions>;
  adapt(spans: readonly Span[], rollout?: TripletRollout): AdaptedSpans;
}

/** Creates a {@link TripletAdapter}. */
export function createTripletAdapter(options: TripletAdapterOptions = {}): TripletAdapter {
  return { options, adapt: (spans, rollout) => spansToTriplets(spans, options, rollout) };
}
