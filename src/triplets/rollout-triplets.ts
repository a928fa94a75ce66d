import { create, type JsonObject } from "@bufbuild/protobuf";
import { spansToMessages } from "../adapter/messages-view.js";
import { spansToTriplets, type TripletAdapterOptions } from "../adapter/spans-to-triplets.js";
import {
  type LlmConversation,
  LlmConversationSchema,
  RewardMatch,
  type RolloutMessages,
  RolloutMessagesSchema,
  type RolloutTriplets,
  type TripletOptions,
  TripletMode,
} from "../gen/agl/v1/triplets_pb.js";
import type { Rollout, Span } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";

/** The adapter options a request's `TripletOptions` stand for. */
export function adapterOptions(options: TripletOptions | undefined): TripletAdapterOptions {
  const rewardMatch =
    options?.rewardMatch === RewardMatch.FIRST_SIBLING
      ? "first_sibling"
      : options?.rewardMatch === RewardMatch.FINAL
        ? "final"
        : "first_occurrence";
  return {
    mode: options?.mode === TripletMode.TRAJECTORY ? "trajectory" : "transition",
    rewardMatch,
    ...(options?.agentNameContains ? { agentNameContains: options.agentNameContains } : {}),
    includeCallsInReward: options?.includeCallsInReward ?? false,
    repairHierarchy: !(options?.skipHierarchyRepair ?? false),
  };
}

/** Only triplets served by this snapshot (and version, when non-zero). */
export interface ResourcesFilter {
  resourcesId: string;
  resourcesVersion: number;
}

/** All spans of one attempt (`latest` or an id), in sequence order. */
export async function attemptSpans(store: StoreApi, rolloutId: string, attemptId: string, signal?: AbortSignal) {
  return (await store.querySpans({ rolloutId, attemptId }, signal ? { signal } : {})).spans;
}

/**
 * Builds the `RolloutTriplets` message of one rollout from its attempt's spans: `spans` when the caller read them
 * already (those of `attemptId`), else read here.
 */
export async function rolloutTriplets(
  store: StoreApi,
  rollout: Rollout,
  attemptId: string,
  options: TripletAdapterOptions,
  resources?: ResourcesFilter,
  signal?: AbortSignal,
  spans?: Span[],
): Promise<RolloutTriplets> {
  const attempt = attemptId && attemptId !== "latest" ? attemptId : (rollout.latestAttempt?.attemptId ?? "");
  spans ??= attempt ? await attemptSpans(store, rollout.rolloutId, attempt, signal) : [];
  const adapted = spansToTriplets(spans, options, rollout);
  const triplets = resources?.resourcesId
    ? adapted.triplets.filter(
        (t) =>
          t.resourcesId === resources.resourcesId &&
          (resources.resourcesVersion === 0 || t.resourcesVersion === resources.resourcesVersion),
      )
    : adapted.triplets;
  // A plain message object, as `create()` would make it without walking the schema.
  const message: RolloutTriplets = {
    $typeName: "agl.v1.RolloutTriplets",
    rolloutId: rollout.rolloutId,
    attemptId: attempt,
    groupId: rollout.groupId,
    status: rollout.status,
    mode: rollout.mode,
    resourcesId: rollout.resourcesId,
    triplets,
    stats: adapted.stats,
  };
  if (adapted.finalReward !== undefined) message.finalReward = adapted.finalReward;
  return message;
}

/** Builds the `RolloutMessages` message of one rollout (latest attempt). */
export async function rolloutMessages(store: StoreApi, rollout: Rollout, signal?: AbortSignal): Promise<RolloutMessages> {
  const attempt = rollout.latestAttempt?.attemptId ?? "";
  const view = spansToMessages(attempt ? await attemptSpans(store, rollout.rolloutId, attempt, signal) : []);
  // Drops `undefined` members: a Struct holds JSON only.
  const plain = (x: unknown): JsonObject[] => JSON.parse(JSON.stringify(x));
  return create(RolloutMessagesSchema, {
    rolloutId: rollout.rolloutId,
    attemptId: attempt,
    status: rollout.status,
    input: rollout.input,
    finalReward: view.finalReward,
    feedback: view.feedback,
    conversations: view.conversations.map(
      (c): LlmConversation =>
        create(LlmConversationSchema, {
          messages: plain(c.messages),
          tools: plain(c.tools),
          model: c.model,
          spanId: c.spanId,
          reward: c.reward,
        }),
    ),
  });
}
