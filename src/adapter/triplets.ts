import type { LlmCall } from "./llm-calls.js";

/** One training sample built from one or more LLM calls. */
export interface Triplet {
  /** Position of the first merged call among the calls that have token ids (0-based). */
  turnIndex: number;
  turnCount: number;
  promptTokenIds: number[];
  responseTokenIds: number[];
  /** Per response token: 1 = sampled by the model, 0 = inserted between calls (observation). */
  responseMask: number[];
  /** Per response token (0 on masked ones) when every merged call had aligned logprobs; else empty. */
  logprobs: number[];
  /** Matched reward of the last merged call that has one. */
  reward: number | undefined;
  resourcesId: string;
  resourcesVersion: number;
  model: string;
  spanIds: string[];
  responseId: string;
}

/** Why a call could not continue the previous sample (trajectory mode). */
export type MismatchKind = "prompt_changed" | "response_changed" | "context_truncated" | "resources_changed" | "model_changed";

/** Samples plus what was counted while building them. */
export interface TripletBuild {
  triplets: Triplet[];
  mismatches: Partial<Record<MismatchKind, number>>;
  logprobMismatches: number;
}

/** A call with both token id lists, ready for a sample. */
export type TokenCall = LlmCall & { promptIds: number[]; responseIds: number[] };

/** Whether a call can go into a sample: not failed, and with prompt and response ids. */
export const hasTokenIds = (call: LlmCall): call is TokenCall =>
  !call.failed && call.promptIds !== undefined && call.promptIds.length > 0 && call.responseIds !== undefined && call.responseIds.length > 0;

function alignedLogprobs(call: TokenCall): number[] | undefined {
  return call.logprobs !== undefined && call.logprobs.length === call.responseIds.length ? call.logprobs : undefined;
}

function start(call: TokenCall, turnIndex: number, logprobs: number[] | undefined): Triplet {
  return {
    turnIndex,
    turnCount: 1,
    promptTokenIds: call.promptIds,
    responseTokenIds: [...call.responseIds],
    responseMask: new Array<number>(call.responseIds.length).fill(1),
    logprobs: logprobs ? [...logprobs] : [],
    reward: call.reward,
    resourcesId: call.resourcesId,
    resourcesVersion: call.resourcesVersion,
    model: call.model,
    spanIds: [call.node.span.spanId],
    responseId: call.responseId ?? "",
  };
}

/** Transition mode: one sample per call, in order. */
export function buildTransitions(calls: readonly TokenCall[]): TripletBuild {
  let logprobMismatches = 0;
  const triplets = calls.map((call, i) => {
    const logprobs = alignedLogprobs(call);
    if (call.logprobs && !logprobs) logprobMismatches++;
    return start(call, i, logprobs);
  });
  return { triplets, mismatches: {}, logprobMismatches };
}

/**
 * Trajectory mode: a call continues the current sample only when its prompt starts exactly with the sample's prompt
 * followed by its response so far (and the same model and resources version served it). The prompt's extra tokens
 * (tool output, the next user turn) are appended with mask 0 and logprob 0, then the new response with mask 1.
 * Anything else starts a new sample and is counted by kind.
 */
export function buildTrajectories(calls: readonly TokenCall[]): TripletBuild {
  const triplets: Triplet[] = [];
  const mismatches: Partial<Record<MismatchKind, number>> = {};
  let logprobMismatches = 0;
  let current: Triplet | undefined;
  let hasLogprobs = false;
  calls.forEach((call, i) => {
    const logprobs = alignedLogprobs(call);
    if (call.logprobs && !logprobs) logprobMismatches++;
    const kind = current ? continuation(current, call) : undefined;
    if (current && kind === undefined) {
      const context = current.promptTokenIds.length + current.responseTokenIds.length;
      const observation = call.promptIds.length - context;
      for (let k = context; k < call.promptIds.length; k++) current.responseTokenIds.push(call.promptIds[k] as number);
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
    current = start(call, i, logprobs);
    hasLogprobs = logprobs !== undefined;
    triplets.push(current);
  });
  return { triplets, mismatches, logprobMismatches };
}

/** Undefined when `call` continues `sample`; otherwise why not. */
function continuation(sample: Triplet, call: TokenCall): MismatchKind | undefined {
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
  if (call.resourcesId !== sample.resourcesId || call.resourcesVersion !== sample.resourcesVersion) return "resources_changed";
  return undefined;
}
