import {
  type DescField,
  type DescMessage,
  type DescMethodBiDiStreaming,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type DescService,
  fromJson,
  isMessage,
  type JsonValue,
  type Message,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import { StructSchema, type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";

/**
 * A request where every `google.protobuf.Value` (a rollout's `input`, a JSON resource) may also be plain JSON:
 * `{ rollouts: [{ input: { question: "2+2?" } }] }`. `Struct` fields (metadata) take plain JSON already.
 */
export type PlainJsonInit<T> = T extends Value
  ? JsonValue | MessageInitShape<typeof ValueSchema>
  : T extends string | number | boolean | bigint | Uint8Array | null | undefined
    ? T
    : T extends Message
      ? { [K in keyof T as K extends "$typeName" ? never : K]?: PlainJsonInit<T[K]> }
      : T extends readonly (infer E)[]
        ? PlainJsonInit<E>[]
        : T extends { case: infer C; value: infer V }
          ? { case: C; value: PlainJsonInit<V> }
          : T extends JsonValue
            ? T
            : T extends Record<string, infer V>
              ? Record<string, PlainJsonInit<V>>
              : T;

type Request<I extends DescMessage> = MessageInitShape<I> | PlainJsonInit<MessageShape<I>>;

/** connect's `Client` of a service, whose requests may hold plain JSON where the contract has a `Value`. */
export type PlainJsonClient<S extends DescService> = {
  [P in keyof S["method"]]: S["method"][P] extends DescMethodUnary<infer I, infer O>
    ? (request: Request<I>, options?: CallOptions) => Promise<MessageShape<O>>
    : S["method"][P] extends DescMethodServerStreaming<infer I, infer O>
      ? (request: Request<I>, options?: CallOptions) => AsyncIterable<MessageShape<O>>
      : S["method"][P] extends DescMethodBiDiStreaming<infer I, infer O>
        ? (requests: AsyncIterable<Request<I>>, options?: CallOptions) => AsyncIterable<MessageShape<O>>
        : never;
};

const valueCases = new Set(["nullValue", "numberValue", "stringValue", "boolValue", "structValue", "listValue"]);

/**
 * A `Value` in the typed form: a message, or an init object `{ kind: { case: "stringValue", value: "x" } }`. Plain
 * JSON of exactly that shape is therefore read as the typed form.
 */
function isTypedValue(v: unknown): boolean {
  if (isMessage(v, ValueSchema)) return true;
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  if (keys.length !== 1 || keys[0] !== "kind") return false;
  const kind = (v as { kind: unknown }).kind;
  return typeof kind === "object" && kind !== null && valueCases.has(String((kind as { case?: unknown }).case));
}

/** The message a field holds, for the fields that can hold a `Value` given as plain JSON (not `Struct`: that is JSON already). */
function fieldMessage(field: DescField): DescMessage | undefined {
  let message: DescMessage | undefined;
  if (field.fieldKind === "message") message = field.message;
  else if (field.fieldKind === "list" && field.listKind === "message") message = field.message;
  else if (field.fieldKind === "map" && field.mapKind === "message") message = field.message;
  return message?.typeName === StructSchema.typeName ? undefined : message;
}

const holdsValue = new Map<string, boolean>();
/** Whether a message can hold a `Value` (cached per type; request types are trees, so no cycle is followed). */
function mayHoldValue(desc: DescMessage, seen: ReadonlySet<string> = new Set()): boolean {
  if (desc.typeName === ValueSchema.typeName) return true;
  const known = holdsValue.get(desc.typeName);
  if (known !== undefined) return known;
  if (seen.has(desc.typeName)) return false;
  const inner = new Set([...seen, desc.typeName]);
  const result = desc.fields.some((field) => {
    const message = fieldMessage(field);
    return message !== undefined && mayHoldValue(message, inner);
  });
  if (seen.size === 0) holdsValue.set(desc.typeName, result);
  return result;
}

function toValue(v: unknown, path: string): unknown {
  if (v === undefined || isTypedValue(v)) return v;
  try {
    return fromJson(ValueSchema, v as JsonValue);
  } catch (error) {
    throw new ConnectError(`${path}: not a JSON value (${error instanceof Error ? error.message : String(error)})`, Code.InvalidArgument);
  }
}

function convert(desc: DescMessage, v: unknown, path: string): unknown {
  return desc.typeName === ValueSchema.typeName ? toValue(v, path) : withTypedValues(desc, v, path);
}

/**
 * Turns plain JSON given for `Value` fields of a request (at any depth) into `Value` messages; typed values, and
 * requests that are messages already, pass unchanged. Copies only what it changes.
 */
export function withTypedValues(desc: DescMessage, init: unknown, path = ""): unknown {
  if (typeof init !== "object" || init === null || isMessage(init) || !mayHoldValue(desc)) return init;
  const source = init as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  const set = (key: string, value: unknown) => {
    if (value === source[key]) return;
    out ??= { ...source };
    out[key] = value;
  };
  for (const field of desc.fields) {
    const message = fieldMessage(field);
    if (!message || !mayHoldValue(message)) continue;
    const at = path ? `${path}.${field.name}` : field.name;
    if (field.oneof) {
      const group = source[field.oneof.localName] as { case?: unknown; value?: unknown } | undefined;
      if (group?.case !== field.localName) continue;
      const value = convert(message, group.value, at);
      if (value !== group.value) set(field.oneof.localName, { ...group, value });
      continue;
    }
    const v = source[field.localName];
    // `null` is JSON null for a Value, and "not set" for any other message.
    if (v === undefined || (v === null && message.typeName !== ValueSchema.typeName)) continue;
    if (field.fieldKind === "list" && Array.isArray(v)) {
      const items = v.map((item, i) => convert(message, item, `${at}[${i}]`));
      if (items.some((item, i) => item !== v[i])) set(field.localName, items);
    } else if (field.fieldKind === "map" && typeof v === "object") {
      const entries = Object.entries(v as Record<string, unknown>);
      const converted = entries.map(([k, item]) => [k, convert(message, item, `${at}[${JSON.stringify(k)}]`)] as const);
      if (converted.some(([k, item]) => item !== (v as Record<string, unknown>)[k])) set(field.localName, Object.fromEntries(converted));
    } else {
      set(field.localName, convert(message, v, at));
    }
  }
  return out ?? init;
}
