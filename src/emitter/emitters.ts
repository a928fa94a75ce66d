import { AglError } from "../core/errors.js";
import { type AttributeMap, attr, flattenAttributes } from "../tracer/attributes.js";
import { type EmitOptions, emitInstantSpan, type SpanCoreFields } from "./instant-span.js";
import {
  AGL_ANNOTATION,
  AGL_EXCEPTION,
  AGL_LINK_PREFIX,
  AGL_MESSAGE,
  AGL_MESSAGE_BODY,
  AGL_OBJECT,
  AGL_OBJECT_JSON,
  AGL_OBJECT_LITERAL,
  AGL_OBJECT_TYPE,
  AGL_TAG_PREFIX,
  EXCEPTION_ESCAPED,
  EXCEPTION_MESSAGE,
  EXCEPTION_STACKTRACE,
  EXCEPTION_TYPE,
} from "../core/semconv.js";

/** Records a text message (`agentlightning.message` with `agentlightning.message.body`). */
export function emitMessage(text: string, options: EmitOptions = {}): SpanCoreFields {
  if (typeof text !== "string") throw new AglError("invalid_argument", `emitMessage takes a string, got ${typeof text}`);
  return emitInstantSpan("emitMessage", AGL_MESSAGE, { [AGL_MESSAGE_BODY]: attr.str(text) }, options, { code: "unset" });
}

/**
 * Records any value (`agentlightning.object`): strings, numbers, booleans and bigints as `object.literal` with their
 * type; bytes as base64 with type `bytes`; anything else as `object.json` with its class name as type.
 */
export function emitObject(value: unknown, options: EmitOptions = {}): SpanCoreFields {
  const attributes: AttributeMap = {};
  if (["string", "number", "boolean", "bigint"].includes(typeof value)) {
    attributes[AGL_OBJECT_TYPE] = attr.str(typeof value);
    attributes[AGL_OBJECT_LITERAL] = attr.str(String(value));
  } else if (value instanceof Uint8Array) {
    attributes[AGL_OBJECT_TYPE] = attr.str("bytes");
    attributes[AGL_OBJECT_LITERAL] = attr.str(Buffer.from(value).toString("base64"));
  } else {
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch (error) {
      throw new AglError("invalid_argument", `emitObject needs a JSON-serializable value: ${(error as Error).message}`);
    }
    if (json === undefined) throw new AglError("invalid_argument", `emitObject cannot serialize ${typeof value}`);
    const type = value === null ? "null" : Array.isArray(value) ? "array" : ((value as object).constructor?.name ?? "object");
    attributes[AGL_OBJECT_TYPE] = attr.str(type);
    attributes[AGL_OBJECT_JSON] = attr.str(json);
  }
  return emitInstantSpan("emitObject", AGL_OBJECT, attributes, options);
}

/** Records an error (`agentlightning.exception` with OpenTelemetry's `exception.*` attributes). */
export function emitException(error: unknown, options: EmitOptions = {}): SpanCoreFields {
  if (!(error instanceof Error)) throw new AglError("invalid_argument", `emitException takes an Error, got ${typeof error}`);
  const attributes: AttributeMap = {
    [EXCEPTION_TYPE]: attr.str(error.name || error.constructor.name),
    [EXCEPTION_MESSAGE]: attr.str(error.message),
    [EXCEPTION_ESCAPED]: attr.bool(true),
  };
  if (error.stack) attributes[EXCEPTION_STACKTRACE] = attr.str(error.stack);
  return emitInstantSpan("emitException", AGL_EXCEPTION, attributes, options);
}

/**
 * Records an annotation (`agentlightning.annotation`): nested objects become dotted keys, arrays of primitives stay
 * arrays. Combine with {@link linkAttributes} and {@link tagAttributes}.
 */
export function emitAnnotation(annotation: Record<string, unknown>, options: EmitOptions = {}): SpanCoreFields {
  if (annotation === null || typeof annotation !== "object" || Array.isArray(annotation)) {
    throw new AglError("invalid_argument", "emitAnnotation takes an object of attributes");
  }
  return emitInstantSpan("emitAnnotation", AGL_ANNOTATION, flattenAttributes(annotation), options);
}

/** `agentlightning.link.{i}.key_match` / `.value_match` attributes linking an annotation to spans. */
export function linkAttributes(links: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(links).flatMap(([key, value], i) => [
      [`${AGL_LINK_PREFIX}.${i}.key_match`, key],
      [`${AGL_LINK_PREFIX}.${i}.value_match`, String(value)],
    ]),
  );
}

/** `agentlightning.tag.{i}` attributes. */
export function tagAttributes(tags: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(tags.map((tag, i) => [`${AGL_TAG_PREFIX}.${i}`, tag]));
}
