import type { Span } from "../gen/agl/v1/types_pb.js";
import { findLlmCalls } from "./llm-calls.js";
import type { LlmCallRecognizer } from "./recognizers.js";
import { repairHierarchy } from "./repair-hierarchy.js";
import { finalReward, matchRewards, type RewardMatchPolicy } from "./rewards.js";
import { buildTraceTree } from "./trace-tree.js";
import { buildTrajectories, buildTransitions, hasTokenIds, type MismatchKind, type Triplet } from "./triplets.js";

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

/** Counters of one adaptation; `mismatches` only in trajectory mode. */
export interface TripletStats {
  spans: number;
  llmCalls: number;
  duplicateCalls: number;
  callsWithoutTokenIds: number;
  failedCalls: number;
  mismatches: Partial<Record<MismatchKind, number>>;
  unmatchedRewards: number;
  logprobMismatches: number;
}

/** The triplets of one attempt's spans. */
export interface AdaptedSpans {
  triplets: Triplet[];
  /** The last reward span's value, if any. */
  finalReward: number | undefined;
  stats: TripletStats;
}

/**
 * Turns one attempt's spans into training samples: builds the trace tree (sequence-id order), repairs the
 * hierarchy, finds and deduplicates LLM calls, matches rewards, and builds transition or trajectory samples from the
 * recorded token ids only.
 */
export function spansToTriplets(spans: readonly Span[], options: TripletAdapterOptions = {}): AdaptedSpans {
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
  const build = options.mode === "trajectory" ? buildTrajectories(usable) : buildTransitions(usable);
  return {
    triplets: build.triplets,
    finalReward: finalReward(found.rewards),
    stats: {
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
  adapt(spans: readonly Span[]): AdaptedSpans;
}

/** Creates a {@link TripletAdapter}. */
export function createTripletAdapter(options: TripletAdapterOptions = {}): TripletAdapter {
  return { options, adapt: (spans) => spansToTriplets(spans, options) };
}
