import { type AttributeValue, type Span, StatusCode } from "../gen/agl/v1/types_pb.js";
import { attr } from "../adapter/attributes.js";
import { randomHex } from "../store/ids.js";
import * as sc from "../core/semconv.js";
import type { ApiName } from "./client-api.js";
import type { CallKind, CompletionRecord } from "./completion-reader.js";
import type { CallScope } from "./scope-check.js";

/** Everything the proxy knows about one call when it ends. */
export interface CallRecord {
  /** Undefined for a call made outside any rollout (not recorded). */
  scope: CallScope | undefined;
  kind: CallKind;
  traceId: string;
  spanId: string;
  /** The caller's span, from its `traceparent` header. */
  parentId: string;
  /** The body the client sent, parsed and as text. */
  request: Record<string, unknown>;
  requestText: string;
  /** The API the client called, and its own body when that is not `request`. */
  api: ApiName;
  clientRequestText: string | undefined;
  /** More attributes (token-in's outcome). */
  extraAttributes: Record<string, string | number | boolean> | undefined;
  stream: boolean;
  /** Epoch seconds. */
  startTime: number;
  endTime: number;
  timeToFirstByteMs: number | undefined;
  backendEndpoint: string | undefined;
  resourcesId: string;
  resourcesVersion: number;
  tries: number;
  httpStatus: number;
  completion: CompletionRecord | undefined;
  /** Set when the call failed: a short type (`upstream_error`, `client_disconnected`, …) and a message. */
  error: { type: string; message: string } | undefined;
}

/** Trace and span ids for a call: the caller's trace when it sent a W3C `traceparent`, else a new one. */
export function traceIdsFor(traceparent: string | string[] | undefined): { traceId: string; spanId: string; parentId: string } {
  const spanId = randomHex(8);
  const header = Array.isArray(traceparent) ? traceparent[0] : traceparent;
  const m = header ? /^[\da-f]{2}-([\da-f]{32})-([\da-f]{16})-[\da-f]{2}$/.exec(header.trim()) : null;
  if (m && !/^0+$/.test(m[1] as string)) return { traceId: m[1] as string, spanId, parentId: m[2] as string };
  return { traceId: randomHex(16), spanId, parentId: "" };
}

/** The span of one proxied call: `gen_ai.*` attributes plus agl's token ids, logprobs and raw bodies. */
export function callSpan(call: CallRecord): Span {
  const c = call.completion;
  const model = c?.model ?? (typeof call.request.model === "string" ? call.request.model : "");
  const operation = call.kind === "chat" ? "chat" : "text_completion";
  const a: Record<string, AttributeValue> = {
    [sc.AGL_LLM_SOURCE]: attr.string(sc.LlmSource.proxy),
    [sc.GEN_AI_OPERATION_NAME]: attr.string(operation),
    [sc.GEN_AI_PROVIDER_NAME]: attr.string("openai"),
    [sc.AGL_LLM_REQUEST]: attr.string(call.requestText),
    [sc.AGL_LLM_STREAM]: attr.bool(call.stream),
    [sc.AGL_LLM_RESOURCES_ID]: attr.string(call.resourcesId),
    [sc.AGL_LLM_RESOURCES_VERSION]: attr.int(call.resourcesVersion),
    [sc.AGL_LLM_LATENCY_MS]: attr.double((call.endTime - call.startTime) * 1000),
    [sc.AGL_LLM_UPSTREAM_TRIES]: attr.int(call.tries),
    [sc.AGL_LLM_HTTP_STATUS]: attr.int(call.httpStatus),
  };
  a[sc.AGL_LLM_API] = attr.string(call.api);
  if (call.clientRequestText !== undefined) a[sc.AGL_LLM_CLIENT_REQUEST] = attr.string(call.clientRequestText);
  for (const [key, value] of Object.entries(call.extraAttributes ?? {})) {
    a[key] = typeof value === "string" ? attr.string(value) : typeof value === "boolean" ? attr.bool(value) : attr.int(value);
  }
  if (typeof call.request.model === "string") a[sc.GEN_AI_REQUEST_MODEL] = attr.string(call.request.model);
  for (const [field, key] of [
    ["temperature", sc.GEN_AI_REQUEST_TEMPERATURE],
    ["top_p", sc.GEN_AI_REQUEST_TOP_P],
    ["max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS],
  ] as const) {
    const v = call.request[field];
    if (typeof v === "number") a[key] = attr.double(v);
  }
  if (call.backendEndpoint) a[sc.AGL_LLM_BACKEND] = attr.string(call.backendEndpoint);
  if (call.timeToFirstByteMs !== undefined) a[sc.AGL_LLM_TTFT_MS] = attr.double(call.timeToFirstByteMs);
  if (c) {
    a[sc.AGL_LLM_RESPONSE] = attr.json(c.body);
    if (c.model) a[sc.GEN_AI_RESPONSE_MODEL] = attr.string(c.model);
    if (c.responseId) a[sc.GEN_AI_RESPONSE_ID] = attr.string(c.responseId);
    if (c.finishReasons.length > 0) a[sc.GEN_AI_RESPONSE_FINISH_REASONS] = attr.strings(c.finishReasons);
    if (c.inputTokens !== undefined) a[sc.GEN_AI_USAGE_INPUT_TOKENS] = attr.int(c.inputTokens);
    if (c.outputTokens !== undefined) a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(c.outputTokens);
    if (c.promptIds) a[sc.AGL_LLM_PROMPT_TOKEN_IDS] = attr.ints(c.promptIds);
    if (c.responseIds) a[sc.AGL_LLM_RESPONSE_TOKEN_IDS] = attr.ints(c.responseIds);
    if (c.logprobs) a[sc.AGL_LLM_LOGPROBS] = attr.doubles(c.logprobs);
  }
  if (call.error) a[sc.ERROR_TYPE] = attr.string(call.error.type);
  // A plain message object rather than `create()`, which would walk every attribute again.
  return {
    $typeName: "agl.v1.Span",
    rolloutId: call.scope?.rolloutId ?? "",
    attemptId: call.scope?.attemptId ?? "",
    sequenceId: 0,
    traceId: call.traceId,
    spanId: call.spanId,
    parentId: call.parentId,
    name: model ? `${operation} ${model}` : operation,
    status: {
      $typeName: "agl.v1.SpanStatus",
      code: call.error ? StatusCode.ERROR : StatusCode.OK,
      description: call.error?.message ?? "",
    },
    attributes: a,
    events: [],
    links: [],
    startTime: call.startTime,
    endTime: call.endTime,
  };
}
