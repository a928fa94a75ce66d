import { isUtf8 } from "node:buffer";
import { type DescField, type DescMessage, type DescOneof, ScalarType } from "@bufbuild/protobuf";
import { type BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { checksEveryString, isPlainProto3, usesJson } from "./plain-proto3.js";
import { wireTypeOf } from "./wire-type-of.js";

/**
 * Checks, without building anything, that a message's bytes are ones the generated decoder (generated-decoder.ts)
 * reads whole: every field known and with its own wire type (or packed), every string valid UTF-8 at any depth, no
 * singular message field (or message case of a oneof) twice, map entries of a key and at most one value, no map key
 * `__proto__`, every length inside its message. Such bytes read the same in every conforming decoder, so they can be
 * kept as they arrived and decoded later. It refuses a little more than the decoder does (a packed list whose last
 * varint runs past the list), never less. Generated per message type, as the decoder is: a scan by reflection cost
 * three quarters of a decode, the sixth sitting's prototype of this one about 40 % (docs/benchmarks.md).
 */
export type Scan = (reader: BinaryReader, bytes: Uint8Array, end: number, depth: number) => boolean;

const recursionLimit = 100;
const scanners = new WeakMap<DescMessage, Scan | null>();

/** The scanner of a type, or null where the generated decoder would not take the type (see `isPlainProto3`). */
export function scannerOf(desc: DescMessage): Scan | null {
  let scan = scanners.get(desc);
  if (scan === undefined) {
    // No `Struct` kept as JSON either: the decoder reads those by hand (`structJson`), and no scan here follows it.
    scan = isPlainProto3(desc, (field) => !usesJson(field)) && checksEveryString(desc) ? generate(desc) : null;
    scanners.set(desc, scan);
  }
  return scan;
}

/** Valid UTF-8 between `start` and `end`: short ASCII by a loop, the rest by Node (faster past a few dozen bytes). */
export function isUtf8At(bytes: Uint8Array, start: number, end: number): boolean {
  if (end - start > 24) return isUtf8(bytes.subarray(start, end));
  for (let i = start; i < end; i++) if ((bytes[i] as number) > 0x7f) return isUtf8(bytes.subarray(start, end));
  return true;
}

/** `reader.uint32()`, a one-byte varint (most tags and lengths) read here, without protobuf-es's general loop. */
export function uint32At(reader: BinaryReader, bytes: Uint8Array): number {
  const byte = bytes[reader.pos] as number;
  if (byte < 0x80) {
    reader.pos++;
    return byte;
  }
  return reader.uint32();
}

/** Moves past a varint of at most 10 bytes that ends before `end`; false for a longer one or one that runs past. */
export function skipVarint(reader: BinaryReader, bytes: Uint8Array, end: number): boolean {
  let pos = reader.pos;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) return false;
    if ((bytes[pos++] as number) < 0x80) {
      reader.pos = pos;
      return true;
    }
  }
  return false;
}

/** Moves past a length-delimited value inside `end`; its end, or -1. */
export function skipLength(reader: BinaryReader, bytes: Uint8Array, end: number): number {
  const valueEnd = uint32At(reader, bytes) + reader.pos;
  if (valueEnd > end) return -1;
  reader.pos = valueEnd;
  return valueEnd;
}

/** The statement that moves past one scalar of a type, or returns false where it cannot. */
function skipScalar(scalar: ScalarType): string {
  switch (wireTypeOf(scalar)) {
    case WireType.Varint:
      return "if (!v(r, b, end)) return false;";
    case WireType.Bit64:
      return "r.pos += 8;";
    case WireType.Bit32:
      return "r.pos += 4;";
    default:
      return scalar === ScalarType.STRING
        ? "{ const e = n(r, b) + r.pos; if (e > end || !u(b, r.pos, e)) return false; r.pos = e; }"
        : "if (l(r, b, end) < 0) return false;";
  }
}

function generate(desc: DescMessage): Scan {
  const children: DescMessage[] = [];
  const child = (message: DescMessage) => {
    let i = children.indexOf(message);
    if (i < 0) i = children.push(message) - 1;
    return `d(${i})`;
  };
  /** Scans a length-prefixed message of the type, inside `end`. */
  const scanChild = (message: DescMessage) =>
    `{ const e = n(r, b) + r.pos; if (e > end || !${child(message)}(r, b, e, depth + 1)) return false; }`;
  const tag = (field: DescField, wireType: WireType) => `case ${((field.number << 3) | wireType) >>> 0}:`;
  // The decoder refuses a singular message field met twice (protobuf-es would merge the two), and a oneof's message
  // case met while it is the oneof's case: a variable for each such field (1 once seen), one holding each oneof's case.
  const locals: string[] = [];
  const local = (name: string) => {
    if (!locals.includes(name)) locals.push(name);
    return name;
  };
  const caseOf = (oneof: DescOneof) => local(`c${desc.oneofs.indexOf(oneof)}`);
  const once = (field: DescField): string => {
    if (field.oneof) {
      const name = caseOf(field.oneof);
      return `if (${name} === ${field.number}) return false; ${name} = ${field.number};`;
    }
    const seen = local(`s${field.number}`);
    return `if (${seen} === 1) return false; ${seen} = 1;`;
  };
  /** Any other member of a oneof becomes its case. */
  const setCase = (field: DescField) => (field.oneof ? `${caseOf(field.oneof)} = ${field.number};` : "");
  const cases: string[] = [];
  for (const field of desc.fields) {
    switch (field.fieldKind) {
      case "scalar":
        cases.push(`${tag(field, wireTypeOf(field.scalar))} ${skipScalar(field.scalar)} ${setCase(field)} break;`);
        break;
      case "enum":
        cases.push(`${tag(field, WireType.Varint)} ${skipScalar(ScalarType.INT32)} ${setCase(field)} break;`);
        break;
      case "message":
        cases.push(`${tag(field, WireType.LengthDelimited)} ${once(field)} ${scanChild(field.message)} break;`);
        break;
      case "list":
        if (field.listKind === "message") {
          cases.push(`${tag(field, WireType.LengthDelimited)} ${scanChild(field.message)} break;`);
        } else {
          const scalar = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
          const wireType = wireTypeOf(scalar);
          cases.push(`${tag(field, wireType)} ${skipScalar(scalar)} break;`);
          if (wireType === WireType.Varint) {
            cases.push(
              `${tag(field, WireType.LengthDelimited)} { const e = n(r, b) + r.pos; if (e > end) return false; while (r.pos < e) if (!v(r, b, e)) return false; break; }`,
            );
          } else if (wireType !== WireType.LengthDelimited) {
            const size = wireType === WireType.Bit64 ? 8 : 4;
            cases.push(
              `${tag(field, WireType.LengthDelimited)} { const s = n(r, b); if (s % ${size} !== 0 || r.pos + s > end) return false; r.pos += s; break; }`,
            );
          }
        }
        break;
      case "map": {
        const keyWire = wireTypeOf(field.mapKey);
        const key =
          field.mapKey === ScalarType.STRING
            ? `{ const e = n(r, b) + r.pos; if (e > end || !u(b, r.pos, e) || p(b, r.pos, e)) return false; r.pos = e; }`
            : skipScalar(field.mapKey);
        let value: string;
        let valueWire: WireType;
        if (field.mapKind === "message") {
          value = scanChild(field.message);
          valueWire = WireType.LengthDelimited;
        } else {
          const scalar = field.mapKind === "enum" ? ScalarType.INT32 : field.scalar;
          value = skipScalar(scalar);
          valueWire = wireTypeOf(scalar);
        }
        cases.push(`${tag(field, WireType.LengthDelimited)} {
          const entryEnd = n(r, b) + r.pos; if (entryEnd > end) return false;
          let valued = false;
          { const end = entryEnd;
            while (r.pos < end) {
              const t = n(r, b);
              if (t === ${(1 << 3) | keyWire}) ${key}
              else if (t === ${(2 << 3) | valueWire}) { if (valued) return false; valued = true; ${value} }
              else return false;
            }
            if (r.pos !== end) return false;
          }
          break;
        }`);
        break;
      }
    }
  }
  const source = `
    return function scan(r, b, end, depth) {
      if (depth > ${recursionLimit}) return false;
      ${locals.map((name) => `let ${name} = 0;`).join(" ")}
      while (r.pos < end) {
        switch (n(r, b)) {
          ${cases.join("\n          ")}
          default: return false;
        }
      }
      return r.pos === end;
    };`;
  const lookup = (i: number): Scan => {
    const scan = scannerOf(children[i] as DescMessage);
    if (scan === null) throw new Error(`no generated scanner for ${children[i]?.typeName}`);
    return scan;
  };
  return new Function("d", "u", "v", "l", "p", "n", source)(lookup, isUtf8At, skipVarint, skipLength, isProtoKey, uint32At) as Scan;
}

/** Whether the bytes between `start` and `end` are `word`'s. */
export function spells(bytes: Uint8Array, start: number, end: number, word: Uint8Array): boolean {
  if (end - start !== word.length) return false;
  for (let i = 0; i < word.length; i++) if (bytes[start + i] !== word[i]) return false;
  return true;
}

const protoKey = Buffer.from("__proto__");

/** Whether the bytes between `start` and `end` spell `__proto__` (a map key the decoder leaves to protobuf-es). */
export const isProtoKey = (bytes: Uint8Array, start: number, end: number): boolean => spells(bytes, start, end, protoKey);
