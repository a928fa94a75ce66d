import { isUtf8 } from "node:buffer";
import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { wireTypeOf } from "./wire-type-of.js";

/**
 * Checks that bytes are a message every conforming decoder reads the same way, and hands over the bytes of top-level
 * message fields on the way. protobuf-es decodes leniently: it reads a known field by its declared type whatever wire
 * type the tag says. Bytes that are kept as they arrived (see src/store/span-wire.ts) must not depend on that: here
 * every known field must have its declared wire type and every string must be valid UTF-8, at any depth. Unknown
 * fields are skipped, as decoders skip them.
 *
 * Returns false for anything else (the bytes may still have decoded; they are just not kept as they are).
 */
export function scanStrictBinary(
  schema: DescMessage,
  bytes: Uint8Array,
  onMessageField?: (field: DescField, value: Uint8Array) => void,
): boolean {
  const reader = new Reader(bytes);
  try {
    readMessage(schema, reader, bytes.length, 0, onMessageField);
    return true;
  } catch {
    return false;
  }
}

/** protobuf-es's default recursion limit. */
const maxDepth = 100;
const fieldMaps = new WeakMap<DescMessage, Map<number, DescField>>();

function fieldsOf(schema: DescMessage): Map<number, DescField> {
  let fields = fieldMaps.get(schema);
  if (fields === undefined) {
    fields = new Map(schema.fields.map((field) => [field.number, field]));
    fieldMaps.set(schema, fields);
  }
  return fields;
}

class Malformed extends Error {}

/** A reader that can hand out views of what it read. */
class Reader extends BinaryReader {
  constructor(private readonly source: Uint8Array) {
    super(source);
  }

  slice(start: number, end: number): Uint8Array {
    return this.source.subarray(start, end);
  }
}

function expect(condition: boolean): void {
  if (!condition) throw new Malformed();
}

function readMessage(
  schema: DescMessage,
  reader: Reader,
  end: number,
  depth: number,
  onMessageField?: (field: DescField, value: Uint8Array) => void,
): void {
  expect(depth <= maxDepth && end <= reader.len);
  const fields = fieldsOf(schema);
  while (reader.pos < end) {
    const [number, wireType] = reader.tag();
    const field = fields.get(number);
    if (field === undefined) {
      reader.skip(wireType, number, maxDepth - depth);
      continue;
    }
    switch (field.fieldKind) {
      case "scalar":
        readScalar(field.scalar, wireType, reader);
        break;
      case "enum":
        readScalar(ScalarType.INT32, wireType, reader);
        break;
      case "message": {
        const value = readSubMessage(field.message, field.delimitedEncoding, wireType, reader, depth);
        onMessageField?.(field, value);
        break;
      }
      case "list":
        if (field.listKind === "message") {
          const value = readSubMessage(field.message, field.delimitedEncoding, wireType, reader, depth);
          onMessageField?.(field, value);
        } else {
          readListElement(field.listKind === "enum" ? ScalarType.INT32 : field.scalar, wireType, reader);
        }
        break;
      case "map":
        expect(wireType === WireType.LengthDelimited);
        readMapEntry(field, reader, depth);
        break;
    }
  }
  expect(reader.pos === end);
}

function readSubMessage(schema: DescMessage, delimited: boolean, wireType: WireType, reader: Reader, depth: number): Uint8Array {
  // Group-encoded (delimited) messages exist only in proto2 and editions; none of ours use them.
  expect(wireType === WireType.LengthDelimited && !delimited);
  const length = reader.uint32();
  const start = reader.pos;
  readMessage(schema, reader, start + length, depth + 1);
  return reader.slice(start, start + length);
}

function readScalar(type: ScalarType, wireType: WireType, reader: Reader): void {
  expect(wireType === wireTypeOf(type));
  if (type === ScalarType.STRING) expect(isUtf8(reader.bytes()));
  else reader.skip(wireType);
}

/** One occurrence of a repeated scalar field: a single element, or a packed run of them. */
function readListElement(type: ScalarType, wireType: WireType, reader: Reader): void {
  const elementWireType = wireTypeOf(type);
  if (wireType !== WireType.LengthDelimited || elementWireType === WireType.LengthDelimited) {
    readScalar(type, wireType, reader);
    return;
  }
  const end = reader.uint32() + reader.pos;
  expect(end <= reader.len);
  while (reader.pos < end) reader.skip(elementWireType);
  expect(reader.pos === end);
}

function readMapEntry(field: DescField & { fieldKind: "map" }, reader: Reader, depth: number): void {
  const end = reader.uint32() + reader.pos;
  expect(end <= reader.len && depth + 1 <= maxDepth);
  while (reader.pos < end) {
    const [number, wireType] = reader.tag();
    if (number === 1) readScalar(field.mapKey, wireType, reader);
    else if (number !== 2) reader.skip(wireType, number, maxDepth - depth);
    else if (field.mapKind === "message") readSubMessage(field.message, false, wireType, reader, depth + 1);
    else readScalar(field.mapKind === "enum" ? ScalarType.INT32 : field.scalar, wireType, reader);
  }
  expect(reader.pos === end);
}
