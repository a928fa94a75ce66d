/**
 * Span names and attribute keys the emitters and the runner write. The shared ones (reward, message, annotation,
 * LLM-call keys) come from `src/adapter/semconv.ts`, so producers and adapters agree; the rest are Agent Lightning
 * v0.3's names (reference §6.4) that only producers need.
 * @module
 */
export {
  AGL_ANNOTATION,
  AGL_EXCEPTION,
  AGL_MESSAGE,
  AGL_MESSAGE_BODY,
  AGL_OBJECT,
  AGL_OPERATION,
  AGL_OPERATION_NAME,
  AGL_REWARD,
  AGL_REWARD_FEEDBACK,
  AGL_REWARD_PREFIX,
  rewardNameKey,
  rewardValueKey,
} from "../core/semconv.js";

/** Resource (and span) attributes naming the attempt a span belongs to; OTLP ingest reads them. */
export const AGL_ROLLOUT_ID_KEY = "agentlightning.rollout_id";
export const AGL_ATTEMPT_ID_KEY = "agentlightning.attempt_id";
export const AGL_SPAN_SEQUENCE_ID_KEY = "agentlightning.span_sequence_id";
export const AGL_TRACER_NAME_KEY = "agentlightning.tracer.name";

/** The root span the runner opens around each attempt (agl's addition; its children are the agent's spans). */
export const AGL_ROLLOUT_SPAN = "agentlightning.rollout";
/** Attributes of the root span. */
export const AGL_ROLLOUT_MODE_KEY = "agentlightning.rollout.mode";
export const AGL_ATTEMPT_SEQUENCE_KEY = "agentlightning.attempt.sequence_id";
export const AGL_AGENT_NAME_KEY = "agent.name";

export const AGL_OBJECT_TYPE = "agentlightning.object.type";
export const AGL_OBJECT_LITERAL = "agentlightning.object.literal";
export const AGL_OBJECT_JSON = "agentlightning.object.json";
export const AGL_LINK_PREFIX = "agentlightning.link";
export const AGL_TAG_PREFIX = "agentlightning.tag";
export const AGL_OPERATION_INPUT = "agentlightning.operation.input";
export const AGL_OPERATION_OUTPUT = "agentlightning.operation.output";

/** OpenTelemetry exception conventions, used by `emitException`. */
export const EXCEPTION_TYPE = "exception.type";
export const EXCEPTION_MESSAGE = "exception.message";
export const EXCEPTION_ESCAPED = "exception.escaped";
export const EXCEPTION_STACKTRACE = "exception.stacktrace";
