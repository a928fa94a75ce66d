import type { AttributeValue, Span } from "../gen/agl/v1/types_pb.js";
import { smallBigInt } from "../encoding/small-bigints.js";

/** A span's attribute map, as stored. */
export type Attributes = Span["attributes"];

/** The string value of `key`, or undefined when absent or of another type. */
export function attrString(attrs: Attributes, key: string): string | undefined {
  const v = attrs[key]?.value;
  return v?.case === "stringValue" ? v.value : undefined;
}

/** The numeric value of `key` (int or double), or undefined. */
export function attrNumber(attrs: Attributes, key: string): number | undefined {
  const v = attrs[key]?.value;
  if (v?.case === "doubleValue") return v.value;
  if (v?.case === "intValue") return Number(v.value);
  return undefined;
}

/** The boolean value of `key`, or undefined. */
export function attrBool(attrs: Attributes, key: string): boolean | undefined {
  const v = attrs[key]?.value;
  return v?.case === "boolValue" ? v.value : undefined;
}

/** An int array as numbers (token ids fit easily), or undefined when absent or of another type. */
export function attrInts(attrs: Attributes, key: string): number[] | undefined {
  const v = attrs[key]?.value;
  if (v?.case !== "intArray") return undefined;
  const src = v.value.values;
  const out = new Array<number>(src.length);
  for (let i = 0; i < src.length; i++) out[i] = Number(src[i]);
  return out;
}

/** A double array (or an int array, converted), or undefined. */
export function attrDoubles(attrs: Attributes, key: string): number[] | undefined {
  const v = attrs[key]?.value;
  if (v?.case === "doubleArray") return v.value.values;
  if (v?.case === "intArray") return v.value.values.map(Number);
  return undefined;
}

/** A string array, or undefined. */
export function attrStrings(attrs: Attributes, key: string): string[] | undefined {
  const v = attrs[key]?.value;
  return v?.case === "stringArray" ? v.value.values : undefined;
}

/** A JSON document stored as a string attribute, parsed; undefined when absent or not valid JSON. */
export function attrJson(attrs: Attributes, key: string): unknown {
  const text = attrString(attrs, key);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// Values are built as plain message objects: `create()` walks the schema for each one, which adds up at some twenty
// attributes per recorded LLM call.
const attributeValue = (value: AttributeValue["value"]): AttributeValue => ({ $typeName: "agl.v1.AttributeValue", value });

/** Attribute values for writing spans. */
export const attr = {
  string: (value: string): AttributeValue => attributeValue({ case: "stringValue", value }),
  bool: (value: boolean): AttributeValue => attributeValue({ case: "boolValue", value }),
  int: (value: number): AttributeValue => attributeValue({ case: "intValue", value: BigInt(Math.trunc(value)) }),
  double: (value: number): AttributeValue => attributeValue({ case: "doubleValue", value }),
  ints: (values: readonly (number | bigint)[]): AttributeValue => {
    const big = new Array<bigint>(values.length);
    for (let i = 0; i < values.length; i++) big[i] = smallBigInt(values[i] as number | bigint);
    return attributeValue({ case: "intArray", value: { $typeName: "agl.v1.IntArray", values: big } });
  },
  doubles: (values: readonly number[]): AttributeValue =>
    attributeValue({ case: "doubleArray", value: { $typeName: "agl.v1.DoubleArray", values: [...values] } }),
  strings: (values: readonly string[]): AttributeValue =>
    attributeValue({ case: "stringArray", value: { $typeName: "agl.v1.StringArray", values: [...values] } }),
  json: (value: unknown): AttributeValue => attr.string(JSON.stringify(value)),
};
