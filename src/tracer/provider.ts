import { type Context, context, type Span as OtelSpan, type Tracer, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, type ReadableSpan, type Span as SdkSpan, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { assignOwn } from "../core/own-property.js";
import type { AttributeMap } from "./attributes.js";
import { type AttemptScope, currentAttempt } from "./attempt-scope.js";
import { toStoreSpan } from "./span-convert.js";

// Spans started inside an attempt, and the exact attribute types set on them (OpenTelemetry cannot tell 1.0 from 1).
const owners = new WeakMap<object, AttemptScope>();
const typedAttributes = new WeakMap<object, AttributeMap>();

/**
 * Routes every span started inside an attempt (by agl, a hook, or any library using the OpenTelemetry API) to that
 * attempt when it ends. The attempt is read from AsyncLocalStorage when the span starts, so concurrent rollouts in one
 * thread never mix their spans.
 */
class AttemptSpanProcessor implements SpanProcessor {
  onStart(span: SdkSpan, _parent: Context): void {
    const scope = currentAttempt();
    if (scope) owners.set(span, scope);
  }
  onEnd(span: ReadableSpan): void {
    const scope = owners.get(span);
    if (!scope) return;
    owners.delete(span);
    // This provider's resource is generic (service name, SDK version); it would only repeat itself on every span.
    scope.record(toStoreSpan(span, scope.rolloutId, scope.attemptId, typedAttributes.get(span), false));
  }
  forceFlush = () => Promise.resolve();
  shutdown = () => Promise.resolve();
}

let tracer: Tracer | undefined;

/**
 * agl's OpenTelemetry tracer in this thread. The first call creates a tracer provider that routes spans to their
 * attempts and, when nobody registered one before, makes it the global provider (so libraries instrumented with the
 * OpenTelemetry API are recorded too) with an AsyncLocalStorage context manager.
 */
export function aglTracer(): Tracer {
  if (tracer) return tracer;
  const provider = new BasicTracerProvider({
    spanProcessors: [new AttemptSpanProcessor()],
    // Token ids and message lists make wide spans; OpenTelemetry's default of 128 attributes would cut them.
    spanLimits: { attributeCountLimit: 100_000, eventCountLimit: 10_000, linkCountLimit: 10_000 },
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  tracer = provider.getTracer("agl");
  return tracer;
}

/** Sets attributes whose exact type matters (double rewards, int token ids, arrays) on a span agl started. */
export function setTypedAttributes(span: OtelSpan, attributes: AttributeMap): void {
  const existing = typedAttributes.get(span);
  typedAttributes.set(span, existing ? assignOwn(existing, attributes) : { ...attributes });
}

/** The context to start a child span in: the active one when it has a span, else the attempt's root span. */
export function parentContext(scope: AttemptScope | undefined): Context {
  const active = context.active();
  if (!scope || trace.getSpan(active)) return active;
  return trace.setSpan(active, scope.rootSpan);
}
