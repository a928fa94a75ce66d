import { create, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { type BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { decodeMessage } from "../encoding/generated-decoder.js";
import { isProtoKey, isUtf8At, type Scan, scannerOf, spells, uint32At } from "../encoding/generated-scanner.js";
import { readString } from "../encoding/short-strings.js";
import { type AttributeValue, AttributeValueSchema, type Span, SpanSchema } from "../gen/agl/v1/types_pb.js";
import { factAttributes, type SpanFacts, spanFacts } from "./span-facts.js";

/** A span's bytes as they arrived, and the sequence id they hold. */
export interface Received {
  bytes: Uint8Array;
  sequenceId: number;
}

/**
 * A span the store received, read without being decoded: the fields the store itself reads (ids, sequence id, name,
 * times, and the facts it keeps as columns), and the bytes it arrived in, which are what the SQL backends store. The
 * demo's spans read in 2.6–2.9 µs where they decoded in 5.0–5.5 µs, most of it their attributes, and a read builds
 * a few objects where a decode built some fifty (every one of them promoted when the span was kept for the triplet
 * stream; now the kept span is this small object, decoded again when the stream reads it).
 *
 * The other fields (status, attributes, events, links, contexts, resource) decode from the bytes when first read,
 * so any reader gets the span it would have got; but they are accessors, not own properties, so what copies or
 * encodes a message by its own properties (a spread, `deepCopy`, the generated encoder's presence checks) must take
 * {@link plainSpan} first. Backends do: these objects never leave the store.
 */
export class ReceivedSpan implements Span {
  // Assigned in the constructor: as class fields, their definitions took about 8 % of the read in its profile.
  declare readonly $typeName: "agl.v1.Span";
  declare rolloutId: string;
  declare attemptId: string;
  declare sequenceId: number;
  declare traceId: string;
  declare spanId: string;
  declare parentId: string;
  declare name: string;
  declare startTime: number | undefined;
  declare endTime: number | undefined;
  declare readonly received: Received;
  declare readonly facts: SpanFacts;
  // Accessors on the prototype, defined below for every field the read does not take.
  declare readonly status: Span["status"];
  declare readonly attributes: Span["attributes"];
  declare readonly events: Span["events"];
  declare readonly links: Span["links"];
  declare readonly context: Span["context"];
  declare readonly parent: Span["parent"];
  declare readonly resource: Span["resource"];

  constructor(fields: ScannedFields, received: Received, facts: SpanFacts) {
    this.$typeName = "agl.v1.Span";
    this.rolloutId = fields.rolloutId;
    this.attemptId = fields.attemptId;
    this.sequenceId = fields.sequenceId;
    this.traceId = fields.traceId;
    this.spanId = fields.spanId;
    this.parentId = fields.parentId;
    this.name = fields.name;
    this.startTime = fields.startTime;
    this.endTime = fields.endTime;
    this.received = received;
    this.facts = facts;
  }

  /** The same span, to be given another sequence id. */
  copy(): ReceivedSpan {
    return new ReceivedSpan(this, this.received, this.facts);
  }

  /** The same span holding a copy of its bytes, not a view into the request they came in (see span-wire's `spanToKeep`). */
  withOwnBytes(): ReceivedSpan {
    const { bytes, sequenceId } = this.received;
    return new ReceivedSpan(this, { bytes: new Uint8Array(bytes), sequenceId }, this.facts);
  }

  /** The span as a plain message of its own, as the generated decoder gives it (the sequence id this one has). */
  toPlain(): Span {
    const span = decodeMessage(SpanSchema, this.received.bytes);
    span.sequenceId = this.sequenceId;
    return span;
  }
}

/** The fields a read takes from the bytes. */
const scanned = ["rolloutId", "attemptId", "sequenceId", "traceId", "spanId", "parentId", "name", "startTime", "endTime"] as const;
type ScannedFields = Pick<Span, (typeof scanned)[number]>;
const isScanned = (field: DescField) => (scanned as readonly string[]).includes(field.localName);

/** Received spans whose other fields were read, decoded once (rare: the store's own code reads none of them). */
const decodedSpans = new WeakMap<ReceivedSpan, Span>();

function decoded(span: ReceivedSpan): Span {
  let whole = decodedSpans.get(span);
  if (whole === undefined) {
    whole = decodeMessage(SpanSchema, span.received.bytes);
    decodedSpans.set(span, whole);
  }
  return whole;
}

for (const field of SpanSchema.fields) {
  if (isScanned(field)) continue;
  Object.defineProperty(ReceivedSpan.prototype, field.localName, {
    get(this: ReceivedSpan) {
      return decoded(this)[field.localName as keyof Span];
    },
  });
}

/** The span as a plain message: a received one decoded, any other as it is. */
export const plainSpan = (span: Span): Span => (span instanceof ReceivedSpan ? span.toPlain() : span);

const fields = SpanSchema.field;
const tagOf = (number: number, wireType: WireType) => (number << 3) | wireType;
const { Varint: varint, Bit64: bit64, LengthDelimited: delimited } = WireType;
const rolloutIdTag = tagOf(fields.rolloutId.number, delimited);
const attemptIdTag = tagOf(fields.attemptId.number, delimited);
const sequenceIdTag = tagOf(fields.sequenceId.number, varint);
const traceIdTag = tagOf(fields.traceId.number, delimited);
const spanIdTag = tagOf(fields.spanId.number, delimited);
const parentIdTag = tagOf(fields.parentId.number, delimited);
const nameTag = tagOf(fields.name.number, delimited);
const attributesTag = tagOf(fields.attributes.number, delimited);
const startTimeTag = tagOf(fields.startTime.number, bit64);
const endTimeTag = tagOf(fields.endTime.number, bit64);

function scanner(desc: DescMessage | undefined): Scan {
  const scan = desc && scannerOf(desc);
  if (!scan) throw new Error(`no generated scanner for ${desc?.typeName}`);
  return scan;
}
const scanValue = scanner(fields.attributes.message);

/**
 * The other message fields (status, events, links, contexts, resource), which a read checks and does not take, by
 * tag: each one's scanner, and for a singular one a bit of its own in the read's `seen` (met twice, the decoder would
 * merge the two, so the read declines).
 */
const checkedMessages = new Map<number, { scan: Scan; bit: number }>();
for (const field of SpanSchema.fields) {
  if (field === fields.attributes || isScanned(field)) continue;
  const singular = field.fieldKind === "message";
  if (!singular && !(field.fieldKind === "list" && field.listKind === "message")) continue; // declined as unknown
  checkedMessages.set(tagOf(field.number, delimited), { scan: scanner(field.message), bit: singular ? 1 << checkedMessages.size : 0 });
}

/** The attributes the facts read, as bytes, by their length: found without decoding every key. */
const factKeys: Array<Array<{ key: string; bytes: Uint8Array }>> = [];
for (const key of factAttributes) {
  const bytes = Buffer.from(key);
  factKeys[bytes.length] ??= [];
  factKeys[bytes.length]?.push({ key, bytes });
}

/** The fact attribute whose key is between `start` and `end`, if any. */
function factKeyAt(bytes: Uint8Array, start: number, end: number): string | undefined {
  const candidates = factKeys[end - start];
  if (candidates === undefined) return undefined;
  for (const candidate of candidates) if (spells(bytes, start, end, candidate.bytes)) return candidate.key;
  return undefined;
}

/** Moves past a length-prefixed message of a type `scan` checks; false where the decoder would not read it whole. */
function scanMessage(scan: Scan, r: BinaryReader, b: Uint8Array, end: number, depth: number): boolean {
  const messageEnd = uint32At(r, b) + r.pos;
  return messageEnd <= end && scan(r, b, messageEnd, depth);
}

/**
 * Reads a span of a request (an element of its `repeated Span` field, between the reader's position and `end`) into
 * a {@link ReceivedSpan}, or undefined where the generated decoder would not read it whole (see generated-scanner.ts):
 * the request is then decoded as before. Fields the generated decoder reads with `readString`, `r.uint32`, `r.double`
 * are read the same way here, so they hold the same values.
 */
export function readReceivedSpan(r: BinaryReader, b: Uint8Array, end: number, depth: number): ReceivedSpan | undefined {
  const start = r.pos;
  let rolloutId = "";
  let attemptId = "";
  let sequenceId = 0;
  let traceId = "";
  let spanId = "";
  let parentId = "";
  let name = "";
  let startTime: number | undefined;
  let endTime: number | undefined;
  let factValues: Record<string, AttributeValue> | undefined;
  let seen = 0;
  while (r.pos < end) {
    const tag = uint32At(r, b);
    switch (tag) {
      case rolloutIdTag:
        rolloutId = readString(r, b, true);
        break;
      case attemptIdTag:
        attemptId = readString(r, b, true);
        break;
      case sequenceIdTag:
        sequenceId = uint32At(r, b);
        break;
      case traceIdTag:
        traceId = readString(r, b, true);
        break;
      case spanIdTag:
        spanId = readString(r, b, true);
        break;
      case parentIdTag:
        parentId = readString(r, b, true);
        break;
      case nameTag:
        name = readString(r, b, true);
        break;
      case startTimeTag:
        startTime = r.double();
        break;
      case endTimeTag:
        endTime = r.double();
        break;
      case attributesTag: {
        const entryEnd = uint32At(r, b) + r.pos;
        if (entryEnd > end) return undefined;
        // The last key and the value, as the decoder takes them; a missing key is "", a missing value an empty one.
        let keyStart = 0;
        let keyEnd = 0;
        let valueStart = -1;
        let valueEnd = -1;
        while (r.pos < entryEnd) {
          const tag = uint32At(r, b);
          if (tag === 10) {
            keyEnd = uint32At(r, b) + r.pos;
            keyStart = r.pos;
            if (keyEnd > entryEnd || !isUtf8At(b, keyStart, keyEnd)) return undefined;
            r.pos = keyEnd;
          } else if (tag === 18 && valueStart < 0) {
            valueEnd = uint32At(r, b) + r.pos;
            valueStart = r.pos;
            if (valueEnd > entryEnd || !scanValue(r, b, valueEnd, depth + 1)) return undefined;
          } else return undefined;
        }
        if (r.pos !== entryEnd || isProtoKey(b, keyStart, keyEnd)) return undefined;
        const fact = factKeyAt(b, keyStart, keyEnd);
        if (fact !== undefined) {
          factValues ??= {};
          factValues[fact] =
            valueStart < 0 ? create(AttributeValueSchema) : decodeMessage(AttributeValueSchema, b.subarray(valueStart, valueEnd));
        }
        break;
      }
      default: {
        const checked = checkedMessages.get(tag);
        if (checked === undefined || seen & checked.bit || !scanMessage(checked.scan, r, b, end, depth + 1)) return undefined;
        seen |= checked.bit;
      }
    }
  }
  if (r.pos !== end) return undefined;
  return new ReceivedSpan(
    { rolloutId, attemptId, sequenceId, traceId, spanId, parentId, name, startTime, endTime },
    { bytes: b.subarray(start, end), sequenceId },
    spanFacts({ name, attemptId, spanId, attributes: factValues ?? {} }),
  );
}
