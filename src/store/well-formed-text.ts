import { type DescField, type DescMessage, isMessage, type JsonValue, ScalarType } from "@bufbuild/protobuf";
import { StructSchema } from "@bufbuild/protobuf/wkt";

/**
 * `text` with every lone UTF-16 surrogate replaced by U+FFFD (`String.prototype.toWellFormed`, native in every Node
 * the package supports). Such text cannot be written as UTF-8: protobuf binary, gRPC and SQL storage would turn it
 * into U+FFFD on the way.
 */
export function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

type Fields = Record<string, unknown>;

/** An own property even for a key like `__proto__`, which a plain assignment would take as the prototype. */
function define(target: Fields, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Copy-on-write of an object or array: copied the first time something changes. A class, not closures: this runs per message. */
class Changes<T extends object> {
  private out: Fields | undefined;
  constructor(private readonly source: T) {}

  private copy(): Fields {
    this.out ??= Array.isArray(this.source) ? ([...this.source] as unknown as Fields) : { ...(this.source as Fields) };
    return this.out;
  }

  set(key: string | number, value: unknown): void {
    if (value !== (this.source as Fields)[key]) define(this.copy(), key, value);
  }

  /** Sets `key` to `value`, or moves it under its well-formed name (a later duplicate name wins, as in JSON). */
  setKey(key: string, value: unknown): void {
    const fixed = wellFormed(key);
    if (fixed === key) {
      this.set(key, value);
      return;
    }
    const out = this.copy();
    delete out[key];
    define(out, fixed, value);
  }

  result(): T {
    return (this.out ?? this.source) as T;
  }
}

function json(value: JsonValue): JsonValue {
  if (typeof value === "string") return wellFormed(value);
  if (typeof value !== "object" || value === null) return value;
  const c = new Changes(value);
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) c.set(i, json(value[i] as JsonValue));
  else for (const key of Object.keys(value)) c.setKey(key, json(value[key] as JsonValue));
  return c.result();
}

function oneofField(fields: readonly DescField[], name: string): DescField | undefined {
  for (const field of fields) if (field.localName === name) return field;
  return undefined;
}

function single(field: DescField, value: unknown): unknown {
  if (field.fieldKind === "scalar") return field.scalar === ScalarType.STRING ? wellFormed(value as string) : value;
  if (field.fieldKind === "message") return messageValue(field.message, value);
  return value;
}

function messageValue(desc: DescMessage, value: unknown): unknown {
  // protobuf-es holds a `Struct` field as a plain JSON object.
  if (desc.typeName === StructSchema.typeName && !isMessage(value)) return json(value as JsonValue);
  return withWellFormedText(desc, value as Fields);
}

function fieldValue(field: DescField, value: unknown): unknown {
  switch (field.fieldKind) {
    case "scalar":
    case "message":
      return single(field, value);
    case "enum":
      return value;
    case "list": {
      if (field.listKind === "enum" || (field.listKind === "scalar" && field.scalar !== ScalarType.STRING)) return value;
      const list = value as unknown[];
      const c = new Changes(list);
      for (let i = 0; i < list.length; i++)
        c.set(i, field.listKind === "message" ? messageValue(field.message, list[i]) : wellFormed(list[i] as string));
      return c.result();
    }
    case "map": {
      const map = value as Fields;
      const c = new Changes(map);
      for (const key of Object.keys(map)) {
        const item = map[key];
        const fixed =
          field.mapKind === "message"
            ? messageValue(field.message, item)
            : field.mapKind === "scalar" && field.scalar === ScalarType.STRING
              ? wellFormed(item as string)
              : item;
        c.setKey(key, fixed);
      }
      return c.result();
    }
  }
}

/**
 * `message` with lone surrogates replaced by U+FFFD in every text it holds (strings, map keys, JSON values), so that
 * what the store keeps reads back the same over every protocol and from every backend. Returns `message` itself when
 * nothing changes, else a copy of what changed (the caller's objects are never modified).
 */
export function withWellFormedText<T extends object>(desc: DescMessage, message: T): T {
  const c = new Changes(message);
  const source = message as Fields;
  for (const member of desc.members) {
    if (member.kind === "oneof") {
      const group = source[member.localName] as { case?: string; value?: unknown } | undefined;
      const field = group?.case === undefined ? undefined : oneofField(member.fields, group.case);
      if (!group || !field) continue;
      const value = single(field, group.value);
      if (value !== group.value) c.set(member.localName, { ...group, value });
      continue;
    }
    const value = source[member.localName];
    if (value !== undefined && value !== null) c.set(member.localName, fieldValue(member, value));
  }
  return c.result();
}

const vouched = new WeakSet<object>();

/**
 * Marks a request whose text is known to be well-formed — decoded from protobuf binary (UTF-8 cannot hold a lone
 * surrogate), or normalized already — so {@link ensureWellFormedText} skips the walk (a few microseconds per span).
 */
export function vouchWellFormed<T extends object>(request: T): T {
  vouched.add(request);
  return request;
}

/** {@link withWellFormedText}, unless the request was vouched for. */
export function ensureWellFormedText<T extends object>(desc: DescMessage, request: T): T {
  return vouched.has(request) ? request : withWellFormedText(desc, request);
}
