import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { TelemetryIntegration } from "ai";
import {
  AGL_LLM_REQUEST,
  AGL_LLM_RESPONSE,
  AGL_LLM_SOURCE,
  GEN_AI_AGENT_NAME,
  GEN_AI_INPUT_MESSAGES,
  GEN_AI_OPERATION_NAME,
  GEN_AI_OUTPUT_MESSAGES,
  GEN_AI_PROVIDER_NAME,
  GEN_AI_REQUEST_MODEL,
  GEN_AI_RESPONSE_FINISH_REASONS,
  GEN_AI_RESPONSE_ID,
  GEN_AI_RESPONSE_MODEL,
  GEN_AI_TOOL_CALL_ID,
  GEN_AI_TOOL_NAME,
  GEN_AI_USAGE_INPUT_TOKENS,
  GEN_AI_USAGE_OUTPUT_TOKENS,
  LlmSource,
} from "../../core/semconv.js";
import { agentRequestAttributes, agentResponseAttributes } from "./agent-api-wire.js";
import { type AttributeMap, attr, toJsonText } from "../attributes.js";
import type { AttemptScope } from "../attempt-scope.js";
import { currentAttempt } from "../attempt-scope.js";
import { setTypedAttributes } from "../provider.js";
import { enrichFromFetchCapture, type HookSpan, startHookSpan } from "./hook-spans.js";
import { responseAttributes } from "./openai-wire.js";

// The AI SDK's step events carry provider-specific bodies that vary by version; each field is checked where read.
// biome-ignore lint/suspicious/noExplicitAny: the payloads are untyped at their source (see above)
type Json = any;

interface OpenCall {
  call: HookSpan;
  modelId: string;
  steps: HookSpan[];
}

// Per attempt: the generateText/streamText calls in progress, oldest first. The AI SDK's events carry no call id, so
// events pair with the oldest open call of their model (exact for sequential calls within one rollout).
const openCalls = new WeakMap<AttemptScope, OpenCall[]>();
const openTools = new Map<string, HookSpan>();

const callsOf = (scope: AttemptScope) => {
  let calls = openCalls.get(scope);
  if (!calls) {
    calls = [];
    openCalls.set(scope, calls);
  }
  return calls;
};
const findCall = (modelId: string | undefined) => {
  const scope = currentAttempt();
  return scope ? callsOf(scope).find((c) => modelId === undefined || c.modelId === modelId) : undefined;
};

function stepAttributes(step: Json): AttributeMap {
  const out: AttributeMap = {};
  const body = typeof step.response?.body === "string" ? safeParse(step.response.body) : step.response?.body;
  if (body && typeof body === "object" && Array.isArray((body as Json).choices)) Object.assign(out, responseAttributes(body, "chat"));
  // The Responses API (`openai()`) and Anthropic Messages read as the chat calls they map to.
  const api = body?.object === "response" ? "responses" : body?.type === "message" ? "messages" : undefined;
  if (api) Object.assign(out, agentResponseAttributes(body, api));
  if (step.response?.body !== undefined)
    out[AGL_LLM_RESPONSE] = attr.str(typeof step.response.body === "string" ? step.response.body : toJsonText(step.response.body));
  const requestText = typeof step.request?.body === "string" ? step.request.body : toJsonText(step.request?.body);
  const request = typeof step.request?.body === "string" ? safeParse(step.request.body) : step.request?.body;
  if (api && request && typeof request === "object") Object.assign(out, agentRequestAttributes(request as Json, requestText, api));
  else if (step.request?.body !== undefined) out[AGL_LLM_REQUEST] = attr.str(requestText);
  if (step.response?.id) out[GEN_AI_RESPONSE_ID] = attr.str(step.response.id);
  if (step.response?.modelId) out[GEN_AI_RESPONSE_MODEL] = attr.str(step.response.modelId);
  if (step.finishReason) out[GEN_AI_RESPONSE_FINISH_REASONS] = attr.strs([String(step.rawFinishReason ?? step.finishReason)]);
  if (typeof step.usage?.inputTokens === "number") out[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(step.usage.inputTokens);
  if (typeof step.usage?.outputTokens === "number") out[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(step.usage.outputTokens);
  const toolCalls = (step.toolCalls ?? []).map((tc: Json) => ({
    id: tc.toolCallId,
    type: "function",
    function: { name: tc.toolName, arguments: toJsonText(tc.input) },
  }));
  out[GEN_AI_OUTPUT_MESSAGES] = attr.json([
    {
      role: "assistant",
      content: step.text ?? "",
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
      finish_reason: step.finishReason,
    },
  ]);
  return out;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * A Vercel AI SDK (`ai@6`) telemetry integration that records, inside a rollout, every `generateText`/`streamText`
 * call as a span (`ai.generate`, named after `functionId` when given), each step — one LLM call — as a child
 * `chat {model}` span with gen_ai attributes, usage and token ids (from the raw response body, or from the fetch
 * wrapper's capture of the same call when streaming), and each tool execution as `execute_tool {name}`.
 */
export function createAiSdkIntegration(): TelemetryIntegration {
  return {
    onStart(event) {
      const scope = currentAttempt();
      if (!scope) return;
      const attributes: AttributeMap = {
        "ai.model.id": attr.str(event.model.modelId),
        "ai.model.provider": attr.str(event.model.provider),
      };
      if (event.functionId) {
        attributes["ai.telemetry.functionId"] = attr.str(event.functionId);
        attributes[GEN_AI_AGENT_NAME] = attr.str(event.functionId);
      }
      const call = startHookSpan(event.functionId ? `ai.generate ${event.functionId}` : "ai.generate", attributes);
      if (call) callsOf(scope).push({ call, modelId: event.model.modelId, steps: [] });
    },
    onStepStart(event) {
      const open = findCall(event.model.modelId);
      if (!open) return;
      const system = typeof event.system === "string" ? [{ role: "system", content: event.system }] : [];
      const step = startHookSpan(
        `chat ${event.model.modelId}`,
        {
          [AGL_LLM_SOURCE]: attr.str(LlmSource.vercelAi),
          [GEN_AI_OPERATION_NAME]: attr.str("chat"),
          [GEN_AI_PROVIDER_NAME]: attr.str(event.model.provider),
          [GEN_AI_REQUEST_MODEL]: attr.str(event.model.modelId),
          [GEN_AI_INPUT_MESSAGES]: attr.json([...system, ...event.messages]),
          "ai.step.number": attr.int(event.stepNumber),
        },
        { parent: open.call, kind: SpanKind.CLIENT },
      );
      if (step) open.steps.push(step);
    },
    onStepFinish(step) {
      const open = findCall(step.model.modelId);
      const hook = open?.steps.shift();
      if (!hook) return;
      const attributes = stepAttributes(step);
      setTypedAttributes(hook.span, attributes);
      enrichFromFetchCapture(
        hook,
        { ...(step.response?.id ? { responseId: step.response.id } : {}), model: step.model.modelId },
        attributes,
      );
      if (step.finishReason === "error") hook.span.setStatus({ code: SpanStatusCode.ERROR });
      hook.span.end();
    },
    onToolCallStart(event) {
      const open = findCall(event.model?.modelId);
      const hook = startHookSpan(
        `execute_tool ${event.toolCall.toolName}`,
        {
          [GEN_AI_OPERATION_NAME]: attr.str("execute_tool"),
          [GEN_AI_TOOL_NAME]: attr.str(event.toolCall.toolName),
          [GEN_AI_TOOL_CALL_ID]: attr.str(event.toolCall.toolCallId),
          "gen_ai.tool.call.arguments": attr.json(event.toolCall.input),
        },
        { parent: open?.call },
      );
      if (hook) openTools.set(event.toolCall.toolCallId, hook);
    },
    onToolCallFinish(event) {
      const hook = openTools.get(event.toolCall.toolCallId);
      if (!hook) return;
      openTools.delete(event.toolCall.toolCallId);
      if (event.success) setTypedAttributes(hook.span, { "gen_ai.tool.call.result": attr.json(event.output) });
      else hook.span.setStatus({ code: SpanStatusCode.ERROR, message: String(event.error) });
      hook.span.end();
    },
    onFinish(event) {
      const scope = currentAttempt();
      if (!scope) return;
      const calls = callsOf(scope);
      const index = calls.findIndex((c) => c.modelId === event.model.modelId);
      if (index < 0) return;
      const [open] = calls.splice(index, 1);
      for (const step of open?.steps ?? []) step.span.end();
      if (typeof event.totalUsage?.inputTokens === "number") {
        setTypedAttributes(open!.call.span, {
          [GEN_AI_USAGE_INPUT_TOKENS]: attr.int(event.totalUsage.inputTokens),
          [GEN_AI_USAGE_OUTPUT_TOKENS]: attr.int(event.totalUsage.outputTokens ?? 0),
        });
      }
      open?.call.span.end();
    },
  };
}

/** Registers agl's integration globally in the AI SDK (`ai@6` must be installed); no per-call option is needed. */
export async function registerAiSdkTracing(): Promise<TelemetryIntegration> {
  const { registerTelemetryIntegration } = await import("ai");
  const integration = createAiSdkIntegration();
  registerTelemetryIntegration(integration);
  return integration;
}
