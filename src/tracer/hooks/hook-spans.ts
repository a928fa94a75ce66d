import { context, type Span as OtelSpan, SpanKind, trace } from "@opentelemetry/api";
import { AGL_LLM_PROMPT_TOKEN_IDS, AGL_LLM_RESPONSE_TOKEN_IDS, GEN_AI_RESPONSE_ID } from "../../core/semconv.js";
import type { AttributeMap } from "../attributes.js";
import { type AttemptScope, currentAttempt } from "../attempt-scope.js";
import { aglTracer, parentContext, setTypedAttributes } from "../provider.js";

/** A span a framework hook opened, with the attempt it belongs to. */
export interface HookSpan {
  span: OtelSpan;
  scope: AttemptScope;
  startedAtMs: number;
}

/**
 * Opens a span for a framework event inside the current attempt, as a child of `parent` when given (the framework's
 * own parent span), else of the active span or the attempt's root. Undefined outside of a rollout.
 */
export function startHookSpan(
  name: string,
  attributes: AttributeMap,
  options: { parent?: HookSpan | undefined; kind?: SpanKind; startTime?: Date } = {},
): HookSpan | undefined {
  const scope = options.parent?.scope ?? currentAttempt();
  if (!scope) return undefined;
  const ctx = options.parent ? trace.setSpan(context.active(), options.parent.span) : parentContext(scope);
  const startTime = options.startTime ?? new Date();
  const span = aglTracer().startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, startTime }, ctx);
  setTypedAttributes(span, attributes);
  return { span, scope, startedAtMs: startTime.getTime() };
}

/**
 * Copies the token ids the openai fetch wrapper captured for the same call onto a framework's LLM span, when the
 * framework span lacks them: matched by response id, else by model and start time. Returns whether one was found.
 */
export function enrichFromFetchCapture(hook: HookSpan, query: { responseId?: string; model?: string }, has: AttributeMap): boolean {
  if (has[AGL_LLM_PROMPT_TOKEN_IDS] && has[AGL_LLM_RESPONSE_TOKEN_IDS]) return false;
  const capture = hook.scope.llmCalls.claim({ ...query, startedAfterMs: hook.startedAtMs });
  if (!capture) return false;
  const copy: AttributeMap = {};
  for (const [key, value] of Object.entries(capture.attributes)) {
    if (key.startsWith("agl.llm.") || key === GEN_AI_RESPONSE_ID) copy[key] = value;
  }
  setTypedAttributes(hook.span, copy);
  return true;
}
