import type { Triplet } from "../gen/agl/v1/triplets_pb.js";
import type { LlmCall } from "./llm-calls.js";

/** Why a call could not continue the previous sample (trajectory mode). */
export type MismatchKind = "prompt_changed" | "response_changed" | "context_truncated" | "resources_changed" | "model_changed";

/** What every sample of one attempt shares and its spans do not say. */
export interface TripletContext {
  groupId: string;
  /** The rollout's resources snapshot: the one a call was served by when its span does not name one. */
  resourcesId: string;
  /** The attempt's last reward span's value. */
  finalReward: number | undefined;
}

/** Samples (`agl.v1.Triplet` messages, ready to send) plus what was counted while building them. */
export interface TripletBuild {
  triplets: Triplet[];
  mismatches: Partial<Record<MismatchKind, number>>;
  logprobMismatches: number;
}

/** A call with both token id lists, ready for a sample. */
export type TokenCall = LlmCall & { promptIds: number[]; responseIds: number[] };

/** Whether a call can go into a sample: not failed, and with prompt and response ids. */
export const hasTokenIds = (call: LlmCall): call is TokenCall =>
  !call.failed &&
  call.promptIds !== undefined &&
  call.promptIds.length > 0 &&
  call.responseIds !== undefined &&
  call.responseIds.length > 0;

function alignedLogprobs(call: TokenCall): number[] | undefined {
  return call.logprobs !== undefined && call.logprobs.length === call.responseIds.length ? call.logprobs : undefined;
}

const resourcesOf = (call: TokenCall, context: TripletContext) => call.resourcesId || context.resourcesId;

function start(call: TokenCall, turnIndex: number, logprobs: number[] | undefined, context: TripletContext): Triplet {
  const span = call.node.span;
  // A plain message object, as `create()` would make it (unset optional fields absent) without walking the schema:
  // the type checker holds it to every field.
  const triplet: Triplet = {
    $typeName: "agl.v1.Triplet",
    rolloutId: span.rolloutId,
    attemptId: span.attemptId,
    groupId: context.groupId,
    turnIndex,
    turnCount: 1,
    promptTokenIds: call.promptIds,
    responseTokenIds: [...call.responseIds],
    responseMask: new Array<number>(call.responseIds.length).fill(1),
    logprobs: logprobs ? [...logprobs] : [],
    resourcesId: resourcesOf(call, context),
    resourcesVersion: call.resourcesVersion,
    model: call.model,
    spanIds: [span.spanId],
    responseId: call.responseId ?? "",
  };
  if (call.reward !== undefined) triplet.reward = call.reward;
  if (context.finalReward !== undefined) triplet.finalReward = context.finalReward;
  return triplet;
}

/** Transition mode: one sample per call, in order. */
export function buildTransitions(calls: readonly TokenCall[], context: TripletContext): TripletBuild {
  let logprobMismatches = 0;
  const triplets = calls.map((call, i) => {
    const logprobs = alignedLogprobs(call);
    if (call.logprobs && !logprobs) logprobMismatches++;
    return start(call, i, logprobs, context);
  });
  return { triplets, mismatches: {}, logprobMismatches };
}

/**
 * Trajectory mode: a call continues the current sample only when its prompt starts exactly with the sample's prompt
 * followed by its response so far (and the same model and resources version served it). The prompt's extra tokens
 * (tool output, the next user turn) are appended with mask 0 and logprob 0, then the new response with mask 1.
 * Anything else starts a new sample and is counted by kind.
 */
export function buildTrajectories(calls: readonly TokenCall[], context: TripletContext): TripletBuild {
  const triplets: Triplet[] = [];
  const mismatches: Partial<Record<MismatchKind, number>> = {};
  let logprobMismatches = 0;
  let current: Triplet | undefined;
  let hasLogprobs = false;
  calls.forEach((call, i) => {
    const logprobs = alignedLogprobs(call);
    if (call.logprobs && !logprobs) logprobMismatches++;
    const kind = current ? continuation(current, call, context) : undefined;
    if (current && kind === undefined) {
      const seen = current.promptTokenIds.length + current.responseTokenIds.length;
      const observation = call.promptIds.length - seen;
      for (let k = seen; k < call.promptIds.length; k++) current.responseTokenIds.push(call.promptIds[k] as number);
      for (let k = 0; k < observation; k++) current.responseMask.push(0);
      for (const id of call.responseIds) current.responseTokenIds.push(id);
      for (let k = 0; k < call.responseIds.length; k++) current.responseMask.push(1);
      hasLogprobs &&= logprobs !== undefined;
      if (hasLogprobs) {
        for (let k = 0; k < observation; k++) current.logprobs.push(0);
        for (const lp of logprobs as number[]) current.logprobs.push(lp);
      } else {
        current.logprobs = [];
      }
      current.turnCount++;
      current.spanIds.push(call.node.span.spanId);
      current.responseId = call.responseId ?? "";
      if (call.reward !== undefined) current.reward = call.reward;
      return;
    }
    if (kind !== undefined) mismatches[kind] = (mismatches[kind] ?? 0) + 1;
    current = start(call, i, logprobs, context);
    hasLogprobs = logprobs !== undefined;
    triplets.push(current);
  });
  return { triplets, mismatches, logprobMismatches };
}

/** Undefined when `call` continues `sample`; otherwise why not. */
function continuation(sample: Triplet, call: TokenCall, context: TripletContext): MismatchKind | undefined {
  const prompt = sample.promptTokenIds;
  const response = sample.responseTokenIds;
  const next = call.promptIds;
  for (let k = 0; k < prompt.length; k++) {
    if (k >= next.length) return "context_truncated";
    if (next[k] !== prompt[k]) return "prompt_changed";
  }
  for (let k = 0; k < response.length; k++) {
    const at = prompt.length + k;
    if (at >= next.length) return "context_truncated";
    if (next[at] !== response[k]) return "response_changed";
  }
  if (call.model !== sample.model) return "model_changed";
  if (resourcesOf(call, context) !== sample.resourcesId || call.resourcesVersion !== sample.resourcesVersion) return "resources_changed";
  return undefined;
}
