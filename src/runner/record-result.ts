import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { RolloutResult } from "../agent/agent.js";
import { AglError } from "../core/errors.js";
import { recordCoreFields, type SpanCoreFields, wasRecorded } from "../emitter/instant-span.js";
import { emitReward } from "../emitter/reward.js";
import { type Span, SpanSchema } from "../gen/agl/v1/types_pb.js";
import type { AttemptScope } from "../tracer/attempt-scope.js";
import { toStoreSpan } from "../tracer/span-convert.js";

const isCoreFields = (v: object): v is SpanCoreFields =>
  typeof (v as SpanCoreFields).name === "string" &&
  typeof (v as SpanCoreFields).attributes === "object" &&
  typeof (v as SpanCoreFields).startTime === "number";
const isStoreSpan = (v: object): v is Span => (v as { $typeName?: string }).$typeName === "agl.v1.Span";
const isReadableSpan = (v: object): v is ReadableSpan =>
  typeof (v as ReadableSpan).spanContext === "function" && Array.isArray((v as ReadableSpan).startTime);

/**
 * Records what a rollout returned, inside its attempt scope: a number (or boolean, as 1/0) becomes a reward span; an
 * array of spans is recorded (spans this attempt already recorded are skipped, so nothing is stored twice); nothing
 * records nothing. Any other value is an error (the attempt fails).
 */
export function recordRolloutResult(result: RolloutResult, scope: AttemptScope, recorded: ReadonlySet<string>): void {
  if (result === undefined || result === null) return;
  if (typeof result === "boolean") {
    scope.logger.warn(`the rollout returned a boolean; recorded as reward ${result ? 1 : 0}`);
    emitReward(result);
    return;
  }
  if (typeof result === "number") {
    emitReward(result);
    return;
  }
  if (!Array.isArray(result)) {
    throw new AglError(
      "invalid_result",
      `a rollout must return a number (the reward), nothing, or an array of spans; it returned ` +
        `${typeof result === "object" ? "an object" : typeof result}`,
    );
  }
  if (result.length === 0) scope.logger.warn("the rollout returned an empty array of spans");
  result.forEach((item: unknown, i) => {
    if (typeof item !== "object" || item === null) {
      throw new AglError("invalid_result", `item ${i} of the returned array is not a span (${item === null ? "null" : typeof item})`);
    }
    if (isStoreSpan(item)) {
      if (recorded.has(item.spanId)) return;
      const ids = { spanId: item.spanId || randomBytes(8).toString("hex"), traceId: item.traceId || scope.rootSpan.spanContext().traceId };
      scope.record(create(SpanSchema, { ...item, ...ids, rolloutId: scope.rolloutId, attemptId: scope.attemptId, sequenceId: 0 }));
    } else if (isReadableSpan(item)) {
      if (recorded.has(item.spanContext().spanId)) return;
      scope.record(toStoreSpan(item, scope.rolloutId, scope.attemptId));
    } else if (isCoreFields(item)) {
      if (!wasRecorded(item)) recordCoreFields(item);
    } else {
      throw new AglError("invalid_result", `item ${i} of the returned array is not a span (emitter result, OpenTelemetry or store span)`);
    }
  });
}
