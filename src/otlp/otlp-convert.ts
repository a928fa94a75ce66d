import { create } from "@bufbuild/protobuf";
import { setOwn } from "../core/own-property.js";
import { AGL_ATTEMPT_ID_KEY, AGL_ROLLOUT_ID_KEY, AGL_SPAN_SEQUENCE_ID_KEY } from "../core/semconv.js";
import { type Span, SpanSchema, StatusCode } from "../gen/agl/v1/types_pb.js";
import type { ExportTraceServiceRequest } from "../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import type { AnyValue, KeyValue } from "../gen/opentelemetry/proto/common/v1/common_pb.js";
import { Status_StatusCode } from "../gen/opentelemetry/proto/trace/v1/trace_pb.js";
import { type AttributeMap, attr, toAttributeValue } from "../tracer/attributes.js";

/** The spans of an OTLP request, grouped by the attempt they belong to, and what could not be placed. */
export interface ConvertedTraces {
  /** Keyed by `rolloutId\0attemptId`. */
  byAttempt: Map<string, Span[]>;
  rejected: number;
  /** Why spans were rejected (first few reasons). */
  reasons: string[];
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
const nanosToSeconds = (nanos: bigint) => (nanos === 0n ? undefined : Number(nanos / 1000n) / 1e6);

/** A plain JS value of an OTLP AnyValue (ints as numbers when exact, kvlists as objects, bytes as hex). */
function plain(value: AnyValue | undefined): unknown {
  const v = value?.value;
  switch (v?.case) {
    case "stringValue":
    case "boolValue":
    case "doubleValue":
      return v.value;
    case "intValue":
      return Number.isSafeInteger(Number(v.value)) ? Number(v.value) : v.value;
    case "bytesValue":
      return hex(v.value);
    case "arrayValue":
      return v.value.values.map(plain);
    case "kvlistValue":
      return Object.fromEntries(v.value.values.map((kv) => [kv.key, plain(kv.value)]));
    default:
      return undefined;
  }
}

/** OTLP key-values as agl attributes: nested key-value lists become dotted keys, like the reference's flattening. */
function convertKeyValues(values: readonly KeyValue[]): AttributeMap {
  const out: AttributeMap = {};
  const put = (key: string, value: AnyValue | undefined) => {
    const v = value?.value;
    if (v?.case === "kvlistValue") {
      for (const kv of v.value.values) put(`${key}.${kv.key}`, kv.value);
      return;
    }
    if (v?.case === "intValue") {
      setOwn(out, key, attr.int(v.value));
      return;
    }
    if (v?.case === "doubleValue") {
      setOwn(out, key, attr.double(v.value));
      return;
    }
    const converted = toAttributeValue(plain(value));
    if (converted) setOwn(out, key, converted);
  };
  for (const kv of values) put(kv.key, kv.value);
  return out;
}

function idOf(attributes: AttributeMap, resource: AttributeMap, key: string): string | undefined {
  const value = attributes[key]?.value ?? resource[key]?.value;
  if (!value || value.case === undefined) return undefined;
  const text = String(value.value).trim();
  return text === "" ? undefined : text;
}

const statusCodes: Record<number, StatusCode> = {
  [Status_StatusCode.UNSET]: StatusCode.UNSET,
  [Status_StatusCode.OK]: StatusCode.OK,
  [Status_StatusCode.ERROR]: StatusCode.ERROR,
};

/**
 * Converts an OTLP export request into store spans. Each span's rollout and attempt come from its attributes
 * `agentlightning.rollout_id` / `agentlightning.attempt_id`, else from its resource's; `agentlightning.span_sequence_id`
 * (an integer ≥ 1) fixes its sequence id, else the store allocates one. Spans without both ids are rejected.
 */
export function convertOtlpTraces(request: ExportTraceServiceRequest): ConvertedTraces {
  const result: ConvertedTraces = { byAttempt: new Map(), rejected: 0, reasons: [] };
  for (const resourceSpans of request.resourceSpans) {
    const resource = convertKeyValues(resourceSpans.resource?.attributes ?? []);
    for (const scopeSpans of resourceSpans.scopeSpans) {
      for (const otlp of scopeSpans.spans) {
        const attributes = convertKeyValues(otlp.attributes);
        const rolloutId = idOf(attributes, resource, AGL_ROLLOUT_ID_KEY);
        const attemptId = idOf(attributes, resource, AGL_ATTEMPT_ID_KEY);
        if (!rolloutId || !attemptId) {
          result.rejected++;
          if (result.reasons.length < 3) {
            result.reasons.push(`span "${otlp.name}" has no ${AGL_ROLLOUT_ID_KEY} and ${AGL_ATTEMPT_ID_KEY} (span or resource attribute)`);
          }
          continue;
        }
        const sequence = Number(idOf(attributes, resource, AGL_SPAN_SEQUENCE_ID_KEY));
        const traceId = hex(otlp.traceId).padStart(32, "0");
        const spanId = hex(otlp.spanId).padStart(16, "0");
        const parentId = otlp.parentSpanId.length > 0 ? hex(otlp.parentSpanId).padStart(16, "0") : "";
        const span = create(SpanSchema, {
          rolloutId,
          attemptId,
          sequenceId: Number.isInteger(sequence) && sequence >= 1 ? sequence : 0,
          traceId,
          spanId,
          parentId,
          name: otlp.name,
          status: { code: statusCodes[otlp.status?.code ?? 0] ?? StatusCode.UNSET, description: otlp.status?.message ?? "" },
          attributes,
          events: otlp.events.map((e) => ({
            name: e.name,
            attributes: convertKeyValues(e.attributes),
            timestamp: nanosToSeconds(e.timeUnixNano),
          })),
          links: otlp.links.map((l) => ({
            context: { traceId: hex(l.traceId), spanId: hex(l.spanId), isRemote: false },
            attributes: convertKeyValues(l.attributes),
          })),
          startTime: nanosToSeconds(otlp.startTimeUnixNano),
          endTime: nanosToSeconds(otlp.endTimeUnixNano),
          context: { traceId, spanId, isRemote: false },
          ...(parentId ? { parent: { traceId, spanId: parentId, isRemote: false } } : {}),
          resource: { attributes: resource, schemaUrl: resourceSpans.schemaUrl },
        });
        const key = `${rolloutId}\0${attemptId}`;
        const group = result.byAttempt.get(key);
        if (group) group.push(span);
        else result.byAttempt.set(key, [span]);
      }
    }
  }
  return result;
}
