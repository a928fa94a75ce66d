import { create } from "@bufbuild/protobuf";
import { setOwn } from "../core/own-property.js";
import { type AttributeValue, AttributeValueSchema } from "../gen/agl/v1/types_pb.js";

/** A span attribute map as the store keeps it. */
export type AttributeMap = Record<string, AttributeValue>;

/** Typed attribute values, for keys whose type must not be guessed (a reward 1.0 stays a double). */
export const attr = {
  str: (value: string) => create(AttributeValueSchema, { value: { case: "stringValue", value } }),
  bool: (value: boolean) => create(AttributeValueSchema, { value: { case: "boolValue", value } }),
  int: (value: number | bigint) => create(AttributeValueSchema, { value: { case: "intValue", value: BigInt(value) } }),
  double: (value: number) => create(AttributeValueSchema, { value: { case: "doubleValue", value } }),
  ints: (values: readonly (number | bigint)[]) =>
    create(AttributeValueSchema, { value: { case: "intArray", value: { values: values.map((v) => BigInt(v)) } } }),
  doubles: (values: readonly number[]) => create(AttributeValueSchema, { value: { case: "doubleArray", value: { values: [...values] } } }),
  strs: (values: readonly string[]) => create(AttributeValueSchema, { value: { case: "stringArray", value: { values: [...values] } } }),
  bools: (values: readonly boolean[]) => create(AttributeValueSchema, { value: { case: "boolArray", value: { values: [...values] } } }),
  /** A JSON document as a string attribute; values JSON cannot encode fall back to their string form. */
  json: (value: unknown) => create(AttributeValueSchema, { value: { case: "stringValue", value: toJsonText(value) } }),
};

/** `JSON.stringify` that never throws: bigints become numbers when exact, cycles and the rest their string form. */
export function toJsonText(value: unknown): string {
  try {
    const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v));
    return text ?? String(value);
  } catch {
    return String(value);
  }
}

const isPrimitive = (v: unknown): v is string | number | boolean | bigint =>
  typeof v === "string" || typeof v === "number" || typeof v === "boolean" || typeof v === "bigint";

/**
 * Converts one value to an attribute: primitives as themselves (integral numbers as ints), homogeneous primitive
 * arrays as typed arrays (ints mixed with non-integral numbers as doubles), anything else as JSON text.
 * Undefined and null give undefined.
 */
export function toAttributeValue(value: unknown): AttributeValue | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return attr.str(value);
  if (typeof value === "boolean") return attr.bool(value);
  if (typeof value === "bigint") return attr.int(value);
  if (typeof value === "number") return Number.isInteger(value) ? attr.int(value) : attr.double(value);
  if (Array.isArray(value) && value.every(isPrimitive)) {
    if (value.every((v) => typeof v === "string")) return attr.strs(value as string[]);
    if (value.every((v) => typeof v === "boolean")) return attr.bools(value as boolean[]);
    if (value.every((v) => typeof v === "bigint" || (typeof v === "number" && Number.isInteger(v)))) {
      return attr.ints(value as (number | bigint)[]);
    }
    if (value.every((v) => typeof v === "number")) return attr.doubles(value as number[]);
  }
  return attr.json(value);
}

/**
 * Flattens nested objects into dotted keys (`a.b`), expanding arrays that hold objects by index (`a.0.b`) and keeping
 * arrays of primitives as array values, as Agent Lightning's `flatten_attributes` does. `prefix` is prepended.
 */
export function flattenAttributes(value: Record<string, unknown>, prefix = ""): AttributeMap {
  const out: AttributeMap = {};
  const visit = (v: unknown, key: string) => {
    if (v === undefined || v === null) return;
    if (Array.isArray(v) && !v.every(isPrimitive)) {
      for (const [i, item] of v.entries()) visit(item, `${key}.${i}`);
    } else if (typeof v === "object" && !Array.isArray(v) && !(v instanceof Date) && isPlainObject(v)) {
      for (const [k, inner] of Object.entries(v)) visit(inner, key ? `${key}.${k}` : k);
    } else {
      const converted = v instanceof Date ? attr.str(v.toISOString()) : toAttributeValue(v);
      if (converted && key) setOwn(out, key, converted);
    }
  };
  visit(value, prefix);
  return out;
}

function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** The plain JS value of an attribute (ints as numbers), for logs and tests. */
export function fromAttributeValue(value: AttributeValue | undefined): unknown {
  const v = value?.value;
  if (!v || v.case === undefined) return undefined;
  switch (v.case) {
    case "intValue":
      return Number(v.value);
    case "intArray":
      return v.value.values.map(Number);
    case "stringArray":
    case "boolArray":
    case "doubleArray":
      return [...v.value.values];
    default:
      return v.value;
  }
}
