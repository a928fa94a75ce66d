import { StatusCode } from "../gen/agl/v1/types_pb.js";
import { attrDoubles, attrInts, attrNumber, attrString } from "./attributes.js";
import { agentNameOf, defaultRecognizers, type LlmCallRecognizer, recognizeLlmCall } from "./recognizers.js";
import { isRewardScope, rewardOf, type RewardNode } from "./rewards.js";
import {
  AGL_LLM_LOGPROBS,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_RESOURCES_ID,
  AGL_LLM_RESOURCES_VERSION,
  AGL_LLM_RESPONSE_TOKEN_IDS,
  AI_SDK_MODEL_ID,
  AI_SDK_RESPONSE_ID,
  GEN_AI_REQUEST_MODEL,
  GEN_AI_RESPONSE_ID,
  GEN_AI_RESPONSE_MODEL,
} from "../core/semconv.js";
import type { TraceNode, TraceTree } from "./trace-tree.js";

/** One LLM call found in a trace. */
export interface LlmCall {
  node: TraceNode;
  /** The recognizer (or `agl.llm.source`) that identified it. */
  source: string;
  priority: number;
  /** The nearest enclosing agent's name, if any. */
  agentName: string | undefined;
  responseId: string | undefined;
  model: string;
  promptIds: number[] | undefined;
  responseIds: number[] | undefined;
  logprobs: number[] | undefined;
  resourcesId: string;
  resourcesVersion: number;
  /** The span ended with an error status. */
  failed: boolean;
  /** Filled by reward matching. */
  reward?: number;
}

/** Options of {@link findLlmCalls}. */
export interface FindLlmCallsOptions {
  /** Only calls whose nearest enclosing agent's name contains this text. */
  agentNameContains?: string;
  /** Keep calls made inside reward computations (LLM judges); dropped by default. */
  includeCallsInReward?: boolean;
  /** The adapter table; default {@link defaultRecognizers}. */
  recognizers?: readonly LlmCallRecognizer[];
}

/** What {@link findLlmCalls} found. */
export interface FoundLlmCalls {
  /** Distinct calls, in sequence-id order. */
  calls: LlmCall[];
  /** Records dropped because another record of the same call was kept. */
  duplicates: number;
  /** Every reward span, in tree order. */
  rewards: RewardNode[];
}

interface Candidate {
  node: TraceNode;
  source: string;
  priority: number;
  agentName: string | undefined;
  inReward: boolean;
  wrapper: Candidate | undefined;
  dropped: boolean;
}

interface Context {
  agentName: string | undefined;
  inReward: boolean;
  call: Candidate | undefined;
}

/**
 * Finds the LLM calls of a trace. One call is often recorded more than once — a framework span around the openai
 * client's span, around the proxy's span (linked by `traceparent`), or the proxy's and the client's records of the
 * same response in two traces. Nested records and records sharing a response id collapse into the most exact one
 * (highest priority; the innermost or earliest on ties).
 */
export function findLlmCalls(tree: TraceTree, options: FindLlmCallsOptions = {}): FoundLlmCalls {
  const table = options.recognizers ?? defaultRecognizers;
  const candidates: Candidate[] = [];
  const rewards: RewardNode[] = [];
  const stack: [TraceNode, Context][] = [[tree.root, { agentName: undefined, inReward: false, call: undefined }]];
  while (stack.length > 0) {
    const [node, ctx] = stack.pop() as [TraceNode, Context];
    let call: Candidate | undefined;
    if (!node.virtual) {
      const reward = rewardOf(node.span);
      if (reward !== undefined) rewards.push({ node, value: reward });
      const found = recognizeLlmCall(node.span, table);
      if (found) {
        call = { node, ...found, agentName: ctx.agentName, inReward: ctx.inReward, wrapper: ctx.call, dropped: false };
        candidates.push(call);
      }
    }
    const childCtx: Context = {
      agentName: (node.virtual ? undefined : agentNameOf(node.span)) ?? ctx.agentName,
      inReward: ctx.inReward || (!node.virtual && isRewardScope(node.span)),
      call: call ?? ctx.call,
    };
    for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i] as TraceNode, childCtx]);
  }

  let duplicates = 0;
  for (const c of candidates) {
    let outer = c.wrapper;
    while (outer?.dropped) outer = outer.wrapper;
    if (!outer) continue;
    if (c.priority >= outer.priority) outer.dropped = true;
    else c.dropped = true;
    duplicates++;
  }
  const byResponseId = new Map<string, LlmCall>();
  const calls: LlmCall[] = [];
  for (const c of candidates) {
    if (c.dropped) continue;
    if (c.inReward && !options.includeCallsInReward) continue;
    if (options.agentNameContains !== undefined && !c.agentName?.includes(options.agentNameContains)) continue;
    const call = readCall(c);
    if (call.responseId) {
      const seen = byResponseId.get(call.responseId);
      if (seen) {
        duplicates++;
        const better =
          call.priority > seen.priority || (call.priority === seen.priority && call.node.span.sequenceId < seen.node.span.sequenceId);
        if (!better) continue;
        calls[calls.indexOf(seen)] = call;
        byResponseId.set(call.responseId, call);
        continue;
      }
      byResponseId.set(call.responseId, call);
    }
    calls.push(call);
  }
  calls.sort((a, b) => a.node.span.sequenceId - b.node.span.sequenceId);
  return { calls, duplicates, rewards };
}

function readCall(c: Candidate): LlmCall {
  const a = c.node.span.attributes;
  return {
    node: c.node,
    source: c.source,
    priority: c.priority,
    agentName: c.agentName,
    responseId: attrString(a, GEN_AI_RESPONSE_ID) || attrString(a, AI_SDK_RESPONSE_ID) || undefined,
    model: attrString(a, GEN_AI_RESPONSE_MODEL) || attrString(a, GEN_AI_REQUEST_MODEL) || attrString(a, AI_SDK_MODEL_ID) || "",
    promptIds: attrInts(a, AGL_LLM_PROMPT_TOKEN_IDS),
    responseIds: attrInts(a, AGL_LLM_RESPONSE_TOKEN_IDS),
    logprobs: attrDoubles(a, AGL_LLM_LOGPROBS),
    resourcesId: attrString(a, AGL_LLM_RESOURCES_ID) ?? "",
    resourcesVersion: attrNumber(a, AGL_LLM_RESOURCES_VERSION) ?? 0,
    failed: c.node.span.status?.code === StatusCode.ERROR,
  };
}
