import { SpanStatusCode } from "@opentelemetry/api";
import { AglError } from "../core/errors.js";
import { type AttributeMap, flattenAttributes } from "../tracer/attributes.js";
import { currentAttempt } from "../tracer/attempt-scope.js";
import { aglTracer, parentContext, setTypedAttributes } from "../tracer/provider.js";

/** What an emitter produces: a span without ids, like Agent Lightning's `SpanCoreFields`. */
export interface SpanCoreFields {
  name: string;
  attributes: AttributeMap;
  /** Epoch seconds. */
  startTime: number;
  endTime: number;
  status: { code: "unset" | "ok" | "error"; description?: string };
}

/** Options every emitter takes. */
export interface EmitOptions {
  /** Extra attributes, flattened into dotted keys. */
  attributes?: Record<string, unknown>;
  /**
   * `false` only builds the span and returns it without recording it, e.g. to return it from the agent. Default
   * `true`: record it in the current attempt (an error outside of any rollout).
   */
  propagate?: boolean;
}

/**
 * Records an instantaneous span (start = end = now) in the current attempt, as a child of the active span, and returns
 * its fields. With `propagate: false` it only returns them.
 */
export function emitInstantSpan(
  what: string,
  name: string,
  attributes: AttributeMap,
  options: EmitOptions = {},
  status: SpanCoreFields["status"] = { code: "ok" },
): SpanCoreFields {
  const all = { ...(options.attributes ? flattenAttributes(options.attributes) : {}), ...attributes };
  const now = Date.now();
  const fields: SpanCoreFields = { name, attributes: all, startTime: now / 1000, endTime: now / 1000, status };
  if (options.propagate === false) return fields;
  const scope = currentAttempt();
  if (!scope) {
    throw new AglError(
      "no_active_attempt",
      `${what} was called outside of a rollout: call it from inside an agent's rollout, or pass { propagate: false }`,
    );
  }
  recordCoreFields(fields);
  return fields;
}

// Fields emitters already recorded, so a rollout returning them does not record them twice.
const recorded = new WeakSet<SpanCoreFields>();

/** Whether these fields were already recorded as a span. */
export const wasRecorded = (fields: SpanCoreFields) => recorded.has(fields);

/** Records span fields (an emitter's output, or fields an agent returned) in the current attempt. */
export function recordCoreFields(fields: SpanCoreFields): void {
  const scope = currentAttempt();
  if (!scope) throw new AglError("no_active_attempt", "spans can only be recorded inside a rollout");
  const span = aglTracer().startSpan(fields.name, { startTime: fields.startTime * 1000 }, parentContext(scope));
  setTypedAttributes(span, fields.attributes);
  if (fields.status.code !== "unset") {
    span.setStatus({
      code: fields.status.code === "ok" ? SpanStatusCode.OK : SpanStatusCode.ERROR,
      ...(fields.status.description ? { message: fields.status.description } : {}),
    });
  }
  span.end(fields.endTime * 1000);
  recorded.add(fields);
}
