import { type DescField, type DescMessage, fromBinary, type Message } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { decodeMessage, decodeReadingElements } from "../encoding/generated-decoder.js";
import { encodeMessage } from "../encoding/generated-encoder.js";
import { scanStrictBinary } from "../encoding/strict-binary.js";
import { type Span, SpanSchema } from "../gen/agl/v1/types_pb.js";
import { type Received, ReceivedSpan, readReceivedSpan } from "./received-span.js";
import { type SpanFacts, spanFacts } from "./span-facts.js";

/**
 * Spans keep the bytes they arrived in, so the SQL backends store those instead of encoding each span again: in
 * `bench/store` that encode was ~8 % of the server's CPU (1 KB spans), plus the garbage it made.
 *
 * The bytes are a view into the request, kept on the decoded span object under a symbol that is not enumerable:
 * spreads, clones and protobuf-es ignore it, and {@link copySpan} carries it over. (A WeakMap cost more than it saved:
 * its entries outlive the young spans.) A sequence id the store assigned later is appended as one more field, which
 * every protobuf decoder takes as the field's value (the last occurrence of a scalar field wins), so the stored binary
 * decodes to exactly the span that was stored. Spans built any other way (the proxy's, the Connect stack's) are
 * encoded as before.
 *
 * Most spans are not even decoded: they are read into a {@link ReceivedSpan}, which holds its bytes itself. A request
 * the generated decoder cannot read whole is decoded by protobuf-es, and its spans keep their bytes under the symbol.
 */

const received = Symbol("agl.receivedBytes");
type WithReceived = Span & { [received]?: Received };
const spanFields = new WeakMap<DescMessage, DescField | null>();
/** `sequence_id` (field 3, a uint32) as a varint tag: one byte, since its number is below 16. */
const sequenceIdTag = (SpanSchema.field.sequenceId.number << 3) | WireType.Varint;

function keep(span: Span, bytes: Received): void {
  Object.defineProperty(span, received, { value: bytes });
}

/** The top-level `repeated Span` field of a request type, if it has one. */
function spanListField(schema: DescMessage): DescField | null {
  let field = spanFields.get(schema);
  if (field === undefined) {
    field =
      schema.fields.find((f) => f.fieldKind === "list" && f.listKind === "message" && f.message.typeName === SpanSchema.typeName) ?? null;
    spanFields.set(schema, field);
  }
  return field;
}

/**
 * Decodes a request; for types with a top-level `repeated Span` field, each span is a {@link ReceivedSpan}. When
 * the generated decoder cannot read the request whole, protobuf-es decodes it, and its spans keep their bytes only
 * where a scan says every decoder reads them as protobuf-es did (see scanStrictBinary); otherwise they are encoded as
 * usual. Each occurrence of a repeated message field is one element, in order, so the occurrences pair with the list.
 */
export function decodeKeepingSpans(schema: DescMessage, bytes: Uint8Array): Message {
  const field = spanListField(schema);
  if (field === null) return decodeMessage(schema, bytes);
  const read = decodeReadingElements(schema, bytes, { number: field.number, read: readReceivedSpan });
  if (read !== undefined) return read;
  const message = fromBinary(schema, bytes);
  const spans = (message as unknown as Record<string, Span[]>)[field.localName] ?? [];
  if (spans.length === 0) return message;
  const slices = strictElements(schema, bytes, field);
  if (slices?.length === spans.length) {
    for (const [i, span] of spans.entries()) keep(span, { bytes: slices[i] as Uint8Array, sequenceId: span.sequenceId });
  }
  return message;
}

/** The bytes of each element of `field` when every decoder reads the message as protobuf-es did; else undefined. */
function strictElements(schema: DescMessage, bytes: Uint8Array, field: DescField): Uint8Array[] | undefined {
  const slices: Uint8Array[] = [];
  const strict = scanStrictBinary(schema, bytes, (f, value) => {
    if (f === field) slices.push(value);
  });
  return strict ? slices : undefined;
}

const handedOver = Symbol("agl.handedOver");

/**
 * Gives `span` to the store with every object in it: its builder keeps no reference through which they could change
 * (the proxy builds its spans for the store alone). The memory backend keeps such a span's objects rather than a copy
 * of them. Returns `span`.
 */
export function handOver(span: Span): Span {
  Object.defineProperty(span, handedOver, { value: true });
  return span;
}

/** Whether `span` was handed over (see {@link handOver}). */
export const isHandedOver = (span: Span): boolean => (span as Span & { [handedOver]?: true })[handedOver] === true;

/** A shallow copy of a span (to change its sequence id) that keeps the bytes it was received in, and its handing over. */
export function copySpan(span: Span): Span {
  if (span instanceof ReceivedSpan) return span.copy();
  const copy = { ...span };
  const bytes = (span as WithReceived)[received];
  if (bytes) keep(copy, bytes);
  if (isHandedOver(span)) handOver(copy);
  return copy;
}

/**
 * A span decoded from a request here, as the store may keep it after the request: holding its own bytes, not a view
 * into the request's. The view would keep the whole request alive, other spans and all, for as long as this one span
 * is kept, so the budget of kept spans (counted by their stored size) would not bound their memory: in a heap
 * snapshot of the demo's store, the kept spans held 271 requests of about 69 KB, 18.7 MB, against 8.4 MB of their own
 * bytes once copied. Undefined for any other span: its caller holds it and may yet change it.
 */
export function spanToKeep(span: Span): Span | undefined {
  if (span instanceof ReceivedSpan) return span.withOwnBytes();
  // Decoded whole: the bytes are for storing it, and a copy without them reads the same.
  return (span as WithReceived)[received] ? { ...span } : undefined;
}

const receivedOf = (span: Span): Received | undefined => (span instanceof ReceivedSpan ? span.received : (span as WithReceived)[received]);

/** What the store keeps of a span as columns (see span-facts.ts): taken when a received span was read. */
export const factsOf = (span: Span): SpanFacts => (span instanceof ReceivedSpan ? span.facts : spanFacts(span));

/** The span's protobuf binary: its received bytes where it has them (only its sequence id may have changed since). */
export function encodeSpan(span: Span): Uint8Array {
  const original = receivedOf(span);
  if (original === undefined) return encodeMessage(SpanSchema, span);
  if (original.sequenceId === span.sequenceId) return original.bytes;
  // The tag and a varint of at most 5 bytes, written in place, into pooled memory: a BinaryWriter, or an ArrayBuffer
  // of its own per span, cost as much again as the scan.
  const { bytes } = original;
  const data = Buffer.allocUnsafe(bytes.length + 6);
  data.set(bytes);
  let at = bytes.length;
  data[at++] = sequenceIdTag;
  let value = span.sequenceId >>> 0;
  while (value > 0x7f) {
    data[at++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  data[at++] = value;
  return data.subarray(0, at);
}
