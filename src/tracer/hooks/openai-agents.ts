import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Span as AgentsSpan, Trace as AgentsTrace, SpanData, TracingProcessor } from "@openai/agents";
import {
  AGL_LLM_SOURCE,
  GEN_AI_AGENT_NAME,
  GEN_AI_INPUT_MESSAGES,
  GEN_AI_OPERATION_NAME,
  GEN_AI_PROVIDER_NAME,
  GEN_AI_REQUEST_MODEL,
  GEN_AI_TOOL_NAME,
  GEN_AI_USAGE_INPUT_TOKENS,
  GEN_AI_USAGE_OUTPUT_TOKENS,
  LlmSource,
  OPENAI_AGENTS_SPAN_TYPE,
} from "../../core/semconv.js";
import { type AttributeMap, attr } from "../attributes.js";
import { setTypedAttributes } from "../provider.js";
import { agentResponseAttributes } from "./agent-api-wire.js";
import { enrichFromFetchCapture, type HookSpan, startHookSpan } from "./hook-spans.js";
import { responseAttributes } from "./openai-wire.js";

// The Agents SDK gives streamed chat completions this placeholder id.
const FAKE_ID = "__fake_id__";
const when = (iso: string | null | undefined) => (iso ? new Date(iso) : new Date());

/** Attributes and a span name for an Agents span when it starts (what is known then). */
function describeStart(data: SpanData): [string, AttributeMap] {
  const attributes: AttributeMap = { [OPENAI_AGENTS_SPAN_TYPE]: attr.str(data.type) };
  switch (data.type) {
    case "agent":
      attributes[GEN_AI_OPERATION_NAME] = attr.str("invoke_agent");
      attributes[GEN_AI_AGENT_NAME] = attr.str(data.name);
      attributes["openai.agents.agent.name"] = attr.str(data.name);
      if (data.tools?.length) attributes["openai.agents.agent.tools"] = attr.strs(data.tools);
      if (data.handoffs?.length) attributes["openai.agents.agent.handoffs"] = attr.strs(data.handoffs);
      return [`invoke_agent ${data.name}`, attributes];
    case "function":
      attributes[GEN_AI_OPERATION_NAME] = attr.str("execute_tool");
      attributes[GEN_AI_TOOL_NAME] = attr.str(data.name);
      return [`execute_tool ${data.name}`, attributes];
    case "generation":
    case "response":
      attributes[AGL_LLM_SOURCE] = attr.str(LlmSource.openaiAgents);
      attributes[GEN_AI_OPERATION_NAME] = attr.str("chat");
      attributes[GEN_AI_PROVIDER_NAME] = attr.str("openai");
      return ["chat", attributes];
    default:
      return [`openai.agents.${data.type}${"name" in data && data.name ? ` ${data.name}` : ""}`, attributes];
  }
}

/** Attributes known when an Agents span ends. */
function describeEnd(data: SpanData, hook: HookSpan): AttributeMap {
  const out: AttributeMap = {};
  if (data.type === "function") {
    if (data.input !== undefined) out["gen_ai.tool.call.arguments"] = attr.str(String(data.input));
    if (data.output !== undefined)
      out["gen_ai.tool.call.result"] = attr.str(typeof data.output === "string" ? data.output : JSON.stringify(data.output));
  } else if (data.type === "generation") {
    if (data.model) out[GEN_AI_REQUEST_MODEL] = attr.str(data.model);
    if (data.input) out[GEN_AI_INPUT_MESSAGES] = attr.json(data.input);
    const response = data.output?.[0];
    if (response) Object.assign(out, responseAttributes({ ...response, id: response.id === FAKE_ID ? undefined : response.id }, "chat"));
    if (typeof data.usage?.input_tokens === "number") out[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(data.usage.input_tokens);
    if (typeof data.usage?.output_tokens === "number") out[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(data.usage.output_tokens);
    const responseId = response?.id && response.id !== FAKE_ID ? String(response.id) : undefined;
    enrichFromFetchCapture(hook, { ...(responseId ? { responseId } : {}), ...(data.model ? { model: data.model } : {}) }, out);
  } else if (data.type === "response") {
    // The Responses API (the SDK's default): the response object, its input items, and the fetch capture's ids.
    if (data._response) Object.assign(out, agentResponseAttributes(data._response, "responses"));
    if (data.response_id) out["gen_ai.response.id"] = attr.str(data.response_id);
    if (data._input) out[GEN_AI_INPUT_MESSAGES] = attr.json(data._input);
    const model = typeof data._response?.model === "string" ? data._response.model : undefined;
    if (model) out[GEN_AI_REQUEST_MODEL] = attr.str(model);
    enrichFromFetchCapture(hook, { ...(data.response_id ? { responseId: data.response_id } : {}), ...(model ? { model } : {}) }, out);
  } else if (data.type === "handoff") {
    if (data.from_agent) out["openai.agents.handoff.from"] = attr.str(data.from_agent);
    if (data.to_agent) out["openai.agents.handoff.to"] = attr.str(data.to_agent);
  } else if (data.type === "guardrail") {
    out["openai.agents.guardrail.triggered"] = attr.bool(Boolean(data.triggered));
  } else if (data.type === "turn" || data.type === "task") {
    if (typeof data.usage?.input_tokens === "number") out[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(data.usage.input_tokens);
    if (typeof data.usage?.output_tokens === "number") out[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(data.usage.output_tokens);
  } else if (data.type === "custom" && data.data) {
    out["openai.agents.custom.data"] = attr.json(data.data);
  }
  return out;
}

/**
 * An OpenAI Agents JS trace processor that records the SDK's traces inside a rollout as spans of the attempt: agents
 * (`invoke_agent {name}`), model calls (`chat {model}` with gen_ai attributes, usage, and the token ids of the raw
 * chat completion or of the fetch wrapper's capture of the same call), tools (`execute_tool {name}`), handoffs and
 * guardrails. Traces outside a rollout are ignored.
 */
export function createAgentsTraceProcessor(): TracingProcessor {
  const open = new Map<string, HookSpan>();
  return {
    async onTraceStart(t: AgentsTrace) {
      const hook = startHookSpan(t.name || "agent workflow", { [OPENAI_AGENTS_SPAN_TYPE]: attr.str("trace") });
      if (hook) open.set(t.traceId, hook);
    },
    async onTraceEnd(t: AgentsTrace) {
      open.get(t.traceId)?.span.end();
      open.delete(t.traceId);
    },
    async onSpanStart(span: AgentsSpan<SpanData>) {
      const parent = open.get(span.parentId ?? span.traceId) ?? open.get(span.traceId);
      const [name, attributes] = describeStart(span.spanData);
      const kind = span.spanData.type === "generation" || span.spanData.type === "response" ? SpanKind.CLIENT : SpanKind.INTERNAL;
      const hook = startHookSpan(name, attributes, { parent, kind, startTime: when(span.startedAt) });
      if (hook) open.set(span.spanId, hook);
    },
    async onSpanEnd(span: AgentsSpan<SpanData>) {
      const hook = open.get(span.spanId);
      if (!hook) return;
      open.delete(span.spanId);
      const data = span.spanData;
      const attributes = describeEnd(data, hook);
      setTypedAttributes(hook.span, attributes);
      if (data.type === "generation" && data.model) hook.span.updateName(`chat ${data.model}`);
      if (data.type === "response" && typeof data._response?.model === "string") hook.span.updateName(`chat ${data._response.model}`);
      if (span.error) hook.span.setStatus({ code: SpanStatusCode.ERROR, message: span.error.message });
      hook.span.end(when(span.endedAt));
    },
    async shutdown() {},
    async forceFlush() {},
  };
}

/** Options of {@link registerOpenAIAgentsTracing}. */
export interface RegisterAgentsTracingOptions {
  /** Keep the SDK's other processors (by default its exporter to OpenAI's dashboard is replaced). Default false. */
  keepExisting?: boolean;
  /**
   * Turn the SDK's tracing on even where it is off by default (NODE_ENV=test, OPENAI_AGENTS_DISABLE_TRACING), since
   * agl needs it to record the agent. Default true.
   */
  enableTracing?: boolean;
}

/** Installs agl's trace processor in the OpenAI Agents SDK (`@openai/agents` must be installed). */
export async function registerOpenAIAgentsTracing(options: RegisterAgentsTracingOptions = {}): Promise<TracingProcessor> {
  const agents = await import("@openai/agents");
  const processor = createAgentsTraceProcessor();
  if (options.keepExisting) agents.addTraceProcessor(processor);
  else agents.setTraceProcessors([processor]);
  if (options.enableTracing !== false) agents.setTracingDisabled(false);
  return processor;
}
