import { create } from "@bufbuild/protobuf";
import { type HrTime, SpanStatusCode, type Attributes as OtelAttributes } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { assignOwn, setOwn } from "../core/own-property.js";
import { type Span, SpanSchema, StatusCode } from "../gen/agl/v1/types_pb.js";
import { type AttributeMap, toAttributeValue } from "./attributes.js";

/** OpenTelemetry's `[seconds, nanoseconds]` as epoch seconds. */
export const hrTimeToSeconds = (t: HrTime) => t[0] + t[1] / 1e9;

/** Converts OpenTelemetry attributes; `typed` values win over guessed ones. */
export function convertAttributes(attributes: OtelAttributes, typed?: AttributeMap): AttributeMap {
  const out: AttributeMap = {};
  for (const [key, value] of Object.entries(attributes)) {
    const converted = toAttributeValue(value);
    if (converted) setOwn(out, key, converted);
  }
  if (typed) assignOwn(out, typed);
  return out;
}

const statusCodes: Record<number, StatusCode> = {
  [SpanStatusCode.UNSET]: StatusCode.UNSET,
  [SpanStatusCode.OK]: StatusCode.OK,
  [SpanStatusCode.ERROR]: StatusCode.ERROR,
};

const resourceCache = new WeakMap<object, AttributeMap>();

/**
 * Converts a finished OpenTelemetry span into the store's span of (`rolloutId`, `attemptId`). The sequence id is left
 * at 0 so the store allocates it. `withResource: false` leaves out the OpenTelemetry resource (agl's own, which says
 * nothing the attempt does not).
 */
export function toStoreSpan(span: ReadableSpan, rolloutId: string, attemptId: string, typed?: AttributeMap, withResource = true): Span {
  const ctx = span.spanContext();
  const parent = span.parentSpanContext;
  let resource = withResource ? resourceCache.get(span.resource) : {};
  if (!resource) {
    resource = convertAttributes(span.resource.attributes);
    resourceCache.set(span.resource, resource);
  }
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    parentId: parent?.spanId ?? "",
    name: span.name,
    status: { code: statusCodes[span.status.code] ?? StatusCode.UNSET, description: span.status.message ?? "" },
    attributes: convertAttributes(span.attributes, typed),
    events: span.events.map((e) => ({
      name: e.name,
      attributes: convertAttributes(e.attributes ?? {}),
      timestamp: hrTimeToSeconds(e.time),
    })),
    links: span.links.map((l) => ({
      context: { traceId: l.context.traceId, spanId: l.context.spanId, isRemote: l.context.isRemote ?? false },
      attributes: convertAttributes(l.attributes ?? {}),
    })),
    startTime: hrTimeToSeconds(span.startTime),
    endTime: hrTimeToSeconds(span.endTime),
    context: { traceId: ctx.traceId, spanId: ctx.spanId, isRemote: false },
    ...(parent ? { parent: { traceId: parent.traceId, spanId: parent.spanId, isRemote: parent.isRemote ?? false } } : {}),
    resource: { attributes: resource },
  });
}
