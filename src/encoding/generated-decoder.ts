import { type DescField, type DescMessage, fromBinary, type MessageShape, ScalarType } from "@bufbuild/protobuf";
import { StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { readMapKey } from "./map-keys.js";
import { readString } from "./short-strings.js";
import { checksEveryString, isPlainProto3, usesJson } from "./plain-proto3.js";
import { smallBigInt } from "./small-bigints.js";
import { wireTypeOf } from "./wire-type-of.js";

/**
 * A binary decoder generated per message type (`new Function`), giving exactly what protobuf-es's `fromBinary` gives.
 * protobuf-es decodes by reflection: it looks each field up in a map by its number and stores it under a name held in
 * a variable, so every store is a megamorphic property access. In the store's profiles that made protobuf-es a quarter
 * of the serving thread's time. The generated code stores each field under its literal name, in a `switch` on the
 * whole tag. It also reads small 64-bit integers (token ids) without `BigInt()`, `google.protobuf.Struct` fields
 * straight into the JSON protobuf-es keeps for them, string map keys through a table of keys met before
 * (./map-keys.ts), and short ASCII strings without an array of their codes (./short-strings.ts). Measured per
 * message: a rollout 1.4 µs against 3.8 µs, a worker with the runner pool's heartbeat stats 4.9 against 10.7 µs, a
 * span of ~900 token ids 13.5 against 32.5 µs.
 *
 * Whatever the generated code does not handle exactly as protobuf-es does is handed to `fromBinary` itself, from the
 * start of the message: unknown fields, a field met with another wire type than its own, a singular message field met
 * twice (protobuf-es merges the two), map keys named `__proto__`, nesting past protobuf-es's recursion limit, and
 * files that are not proto3 (presence tracked on a prototype). Those never come from agl's encoders, and the result
 * is protobuf-es's in every case.
 */
type Decode = (reader: BinaryReader, bytes: Uint8Array, end: number, depth: number, elements?: ElementReader) => unknown;

/**
 * Reads each element of one repeated message field of the top-level message (`number`) in place of the generated
 * decoder: called with the reader at the element's start and the element's end, it must leave the reader at that end
 * and return the element, or undefined where it cannot read it exactly as protobuf-es would.
 */
export interface ElementReader {
  number: number;
  read(reader: BinaryReader, bytes: Uint8Array, end: number, depth: number): unknown;
}

/** The generated code's answer when it cannot decode the message as protobuf-es would. */
const fallBack = Symbol("fall back to fromBinary");
const recursionLimit = 100;
const decoders = new WeakMap<DescMessage, Decode | null>();

/** `fromBinary(schema, bytes)`, through the generated decoder where the schema allows one. */
export function decodeMessage<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  const decode = decoderOf(schema);
  const message = decode === null ? fallBack : generated(decode, bytes);
  return message === fallBack ? fromBinary(schema, bytes) : (message as MessageShape<Desc>);
}

/**
 * `decodeMessage`, with each element of one top-level repeated message field read by `elements.read` (the store reads
 * spans into objects that keep their bytes: src/store/received-span.ts). Undefined where the generated decoder cannot
 * read the message as protobuf-es would, `read` refused an element, or the type has a string whose UTF-8 is not
 * checked: the caller then decodes it some other way.
 */
export function decodeReadingElements<Desc extends DescMessage>(
  schema: Desc,
  bytes: Uint8Array,
  elements: ElementReader,
): MessageShape<Desc> | undefined {
  const decode = checksEveryString(schema) ? decoderOf(schema) : null;
  const message = decode === null ? fallBack : generated(decode, bytes, elements);
  return message === fallBack ? undefined : (message as MessageShape<Desc>);
}

/** The generated decoder's message, or `fallBack` (malformed bytes included: protobuf-es says how, in its own words). */
function generated(decode: Decode, bytes: Uint8Array, elements?: ElementReader): unknown {
  try {
    return decode(new BinaryReader(bytes), bytes, bytes.byteLength, 1, elements);
  } catch {
    return fallBack;
  }
}

function decoderOf(desc: DescMessage): Decode | null {
  let decode = decoders.get(desc);
  if (decode === undefined) {
    decode = isPlainProto3(desc) ? generate(desc) : null;
    decoders.set(desc, decode);
  }
  return decode;
}

/** The expression reading one scalar from `r`, as protobuf-es's compiled reader reads it. */
function readScalar(scalar: ScalarType, longAsString: boolean, utf8Validation: boolean): string {
  const long = (call: string) => (longAsString ? `String(${call})` : call);
  switch (scalar) {
    case ScalarType.STRING:
      return `str(r, b, ${utf8Validation})`;
    case ScalarType.BOOL:
      return "r.bool()";
    case ScalarType.DOUBLE:
      return "r.double()";
    case ScalarType.FLOAT:
      return "r.float()";
    case ScalarType.INT32:
      return "r.int32()";
    case ScalarType.UINT32:
      return "r.uint32()";
    case ScalarType.SINT32:
      return "r.sint32()";
    case ScalarType.FIXED32:
      return "r.fixed32()";
    case ScalarType.SFIXED32:
      return "r.sfixed32()";
    case ScalarType.INT64:
      return long("i64(r, b)");
    case ScalarType.UINT64:
      return long("u64(r, b)");
    case ScalarType.SINT64:
      return long("s64(r, b)");
    case ScalarType.FIXED64:
      return long("r.fixed64()");
    case ScalarType.SFIXED64:
      return long("r.sfixed64()");
    case ScalarType.BYTES:
      return "r.bytes()";
  }
}

const prop = (name: string) => `[${JSON.stringify(name)}]`;

/**
 * Generates the decoder of one message type. Child types are looked up when first called (a type may contain
 * itself); constants (zero values that are objects) are passed in, shared as protobuf-es shares them.
 */
function generate(desc: DescMessage): Decode {
  const constants: unknown[] = [];
  const children: DescMessage[] = [];
  const constant = (value: unknown) => `c[${constants.push(value) - 1}]`;
  const child = (message: DescMessage) => {
    let i = children.indexOf(message);
    if (i < 0) i = children.push(message) - 1;
    return `d(${i})`;
  };
  /** Reads a length-prefixed message of the field's type: a Struct kept as JSON is read straight into JSON. */
  const readChild = (field: DescField & { message: DescMessage }, end = "r.uint32() + r.pos") =>
    `${usesJson(field) ? "sj" : child(field.message)}(r, b, ${end}, depth + 1)`;
  const init: string[] = [`$typeName: ${JSON.stringify(desc.typeName)}`];
  for (const member of desc.members) {
    const name = JSON.stringify(member.localName);
    if (member.kind === "oneof") init.push(`${name}: { case: undefined }`);
    else if (member.fieldKind === "list") init.push(`${name}: []`);
    else if (member.fieldKind === "map") init.push(`${name}: {}`);
    else if (member.fieldKind !== "message" && member.presence === 2 /* IMPLICIT */) {
      const zero = zeroValue(member);
      init.push(`${name}: ${typeof zero === "object" || typeof zero === "bigint" ? constant(zero) : JSON.stringify(zero)}`);
    }
  }

  const cases: string[] = [];
  const tag = (field: DescField, wireType: WireType) => `case ${((field.number << 3) | wireType) >>> 0}:`;
  for (const field of desc.fields) {
    const local = prop(field.localName);
    const oneof = field.oneof ? prop(field.oneof.localName) : undefined;
    const set = (value: string) =>
      oneof ? `m${oneof} = { case: ${JSON.stringify(field.localName)}, value: ${value} };` : `m${local} = ${value};`;
    switch (field.fieldKind) {
      case "scalar":
        cases.push(
          `${tag(field, wireTypeOf(field.scalar))} ${set(readScalar(field.scalar, field.longAsString, field.utf8Validation))} break;`,
        );
        break;
      case "enum":
        cases.push(`${tag(field, WireType.Varint)} ${set("r.int32()")} break;`);
        break;
      case "message": {
        const present = oneof ? `m${oneof}.case === ${JSON.stringify(field.localName)}` : `m${local} !== undefined`;
        cases.push(
          `${tag(field, WireType.LengthDelimited)} { if (${present}) return F; const v = ${readChild(field)}; if (v === F) return F; ${set("v")} break; }`,
        );
        break;
      }
      case "list":
        if (field.listKind === "message") {
          // At the top level (`k` given), the element is read by `k` when it is the field asked for.
          cases.push(
            `${tag(field, WireType.LengthDelimited)} { const e = r.uint32() + r.pos; const v = k !== undefined && k.number === ${field.number} ? k.read(r, b, e, depth + 1) ?? F : ${readChild(field, "e")}; if (v === F || r.pos !== e) return F; m${local}.push(v); break; }`,
          );
        } else {
          const scalar = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
          const read = readScalar(scalar, field.listKind === "scalar" && field.longAsString, field.utf8Validation);
          const wireType = wireTypeOf(scalar);
          cases.push(`${tag(field, wireType)} m${local}.push(${read}); break;`);
          if (wireType !== WireType.LengthDelimited) {
            cases.push(
              `${tag(field, WireType.LengthDelimited)} { const a = m${local}; const e = r.uint32() + r.pos; while (r.pos < e) a.push(${read}); break; }`,
            );
          }
        }
        break;
      case "map": {
        const keyRead =
          field.mapKey === ScalarType.STRING ? `mk(r, b, ${field.utf8Validation})` : readScalar(field.mapKey, false, field.utf8Validation);
        const keyZero = JSON.stringify(String(zeroScalar(field.mapKey)));
        let valueRead: string;
        let valueZero: string;
        let valueWire: WireType;
        if (field.mapKind === "message") {
          valueRead = `${readChild(field)}; if (v === F) return F;`;
          // A missing value is the message's zero: an empty message (or JSON object) of its own.
          valueZero = usesJson(field) ? "{}" : `${child(field.message)}(r, b, r.pos, depth + 1)`;
          valueWire = WireType.LengthDelimited;
        } else if (field.mapKind === "enum") {
          valueRead = "r.int32();";
          valueZero = JSON.stringify(field.enum.values[0]?.number ?? 0);
          valueWire = WireType.Varint;
        } else {
          valueRead = `${readScalar(field.scalar, false, field.utf8Validation)};`;
          const zero = zeroScalar(field.scalar);
          valueZero =
            field.scalar === ScalarType.BYTES ? "new Uint8Array(0)" : typeof zero === "bigint" ? constant(zero) : JSON.stringify(zero);
          valueWire = wireTypeOf(field.scalar);
        }
        cases.push(`${tag(field, WireType.LengthDelimited)} {
          const e = r.uint32() + r.pos; let k, v, seen = false;
          while (r.pos < e) {
            const t = r.uint32();
            if (t === ${(1 << 3) | wireTypeOf(field.mapKey)}) k = ${keyRead};
            else if (t === ${(2 << 3) | valueWire}) { if (seen) return F; seen = true; v = ${valueRead} }
            else return F;
          }
          if (k === undefined) k = ${keyZero};
          if (String(k) === "__proto__") return F;
          if (v === undefined) v = ${valueZero};
          m${local}[k] = v;
          break;
        }`);
        break;
      }
    }
  }

  const source = `
    return function decode(r, b, end, depth, k) {
      if (depth > ${recursionLimit}) return F;
      const m = { ${init.join(", ")} };
      while (r.pos < end) {
        switch (r.uint32()) {
          ${cases.join("\n          ")}
          default: return F;
        }
      }
      if (r.pos !== end) return F;
      return m;
    };`;
  const lookup = (i: number): Decode => {
    const decode = decoderOf(children[i] as DescMessage);
    if (decode === null) throw new Error(`no generated decoder for ${children[i]?.typeName}`);
    return decode;
  };
  return new Function("F", "c", "d", "sj", "mk", "str", "i64", "u64", "s64", source)(
    fallBack,
    constants,
    lookup,
    structJson,
    readMapKey,
    readString,
    int64,
    uint64,
    sint64,
  ) as Decode;
}

function zeroScalar(scalar: ScalarType): unknown {
  switch (scalar) {
    case ScalarType.STRING:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.BYTES:
      return new Uint8Array(0);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return 0n;
    default:
      return 0;
  }
}

/** A field's zero value as `create()` sets it (proto3 has no custom defaults). */
function zeroValue(field: DescField): unknown {
  if (field.fieldKind === "enum") return field.enum.values[0]?.number ?? 0;
  if (field.fieldKind !== "scalar") return undefined;
  const zero = zeroScalar(field.scalar);
  return field.longAsString && typeof zero === "bigint" ? "0" : zero;
}

/**
 * A varint of at most four bytes (below 2^28) at the reader's position, as a number, the reader moved past it; -1,
 * nothing read, for a longer one (or one that runs past the end: protobuf-es's reader then says so).
 */
function shortVarint(r: BinaryReader, bytes: Uint8Array): number {
  let pos = r.pos;
  let value = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    if (pos >= r.len) return -1;
    const byte = bytes[pos++] as number;
    value |= (byte & 0x7f) << shift;
    if (byte < 0x80) {
      r.pos = pos;
      return value;
    }
  }
  return -1;
}

/** An int64 as the bigint protobuf-es reads; small values without `BigInt()`. */
function int64(r: BinaryReader, bytes: Uint8Array): bigint {
  const value = shortVarint(r, bytes);
  return value < 0 ? (r.int64() as bigint) : smallBigInt(value);
}

/** A uint64 as the bigint protobuf-es reads; small values without `BigInt()`. */
function uint64(r: BinaryReader, bytes: Uint8Array): bigint {
  const value = shortVarint(r, bytes);
  return value < 0 ? (r.uint64() as bigint) : smallBigInt(value);
}

/** A sint64 (token ids, in `IntArray`) as the bigint protobuf-es reads; token-sized values without `BigInt()`. */
function sint64(r: BinaryReader, bytes: Uint8Array): bigint {
  const value = shortVarint(r, bytes);
  return value < 0 ? (r.sint64() as bigint) : smallBigInt((value >>> 1) ^ -(value & 1));
}

// `google.protobuf.Struct` fields are kept as JSON: read straight into it, without the Value messages protobuf-es
// builds first (the runner pool's heartbeat stats are a Struct of ~20 entries on every worker row). Strict UTF-8 as
// protobuf-es reads these fields.
const strictKeys = StructSchema.field.fields.utf8Validation;
const strictStrings = ValueSchema.field.stringValue.utf8Validation;

function structJson(r: BinaryReader, bytes: Uint8Array, end: number, depth: number): unknown {
  if (depth > recursionLimit) return fallBack;
  const json: Record<string, unknown> = {};
  while (r.pos < end) {
    if (r.uint32() !== 10 /* fields, a map entry */) return fallBack;
    const entryEnd = r.uint32() + r.pos;
    let key = "";
    let value: unknown = null; // a missing value is an empty Value: null
    let seen = false;
    while (r.pos < entryEnd) {
      const tag = r.uint32();
      if (tag === 10) key = readMapKey(r, bytes, strictKeys);
      else if (tag === 18 && !seen) {
        seen = true;
        value = valueJson(r, bytes, r.uint32() + r.pos, depth + 1);
        if (value === fallBack) return fallBack;
      } else return fallBack;
    }
    if (r.pos !== entryEnd || key === "__proto__") return fallBack;
    json[key] = value;
  }
  return r.pos === end ? json : fallBack;
}

function valueJson(r: BinaryReader, bytes: Uint8Array, end: number, depth: number): unknown {
  if (depth > recursionLimit) return fallBack;
  if (r.pos === end) return null;
  let value: unknown;
  switch (r.uint32()) {
    case 8: // null_value
      r.int32();
      value = null;
      break;
    case 17: // number_value
      value = r.double();
      break;
    case 26: // string_value
      value = readString(r, bytes, strictStrings);
      break;
    case 32: // bool_value
      value = r.bool();
      break;
    case 42: // struct_value
      value = structJson(r, bytes, r.uint32() + r.pos, depth + 1);
      break;
    case 50: // list_value
      value = listJson(r, bytes, r.uint32() + r.pos, depth + 1);
      break;
    default:
      return fallBack;
  }
  // A second kind in one Value: protobuf-es keeps the last, or merges two of the same message case.
  return r.pos === end ? value : fallBack;
}

function listJson(r: BinaryReader, bytes: Uint8Array, end: number, depth: number): unknown {
  if (depth > recursionLimit) return fallBack;
  const list: unknown[] = [];
  while (r.pos < end) {
    if (r.uint32() !== 10 /* values */) return fallBack;
    const value = valueJson(r, bytes, r.uint32() + r.pos, depth + 1);
    if (value === fallBack) return fallBack;
    list.push(value);
  }
  return r.pos === end ? list : fallBack;
}
