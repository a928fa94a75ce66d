import { type DescField, type DescMessage, type Message, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { type Span, SpanSchema } from "../gen/agl/v1/types_pb.js";

/**
 * Spans keep the bytes they arrived in, so the SQL backends store those instead of encoding each span again: in
 * `bench/store` that encode was ~8 % of the server's CPU (1 KB spans), plus the garbage it made.
 *
 * The bytes are a view into the request, remembered per decoded span object; a copy made with {@link copySpan} shares
 * them. A sequence id the store assigned later is appended as one more field, which every protobuf decoder takes as
 * the field's value (the last occurrence of a scalar field wins), so the stored binary decodes to exactly the span
 * that was stored. Spans built any other way (the proxy's, the Connect stack's) are encoded as before.
 */
interface Received {
  bytes: Uint8Array;
  /** The span's sequence id when it was decoded: the value `bytes` hold. */
  sequenceId: number;
}

const received = new WeakMap<Span, Received>();
const spanFields = new WeakMap<DescMessage, DescField | null>();
const sequenceIdField = SpanSchema.field.sequenceId.number;

/** The top-level `repeated Span` field of a request type, if it has one. */
function spanListField(schema: DescMessage): DescField | null {
  let field = spanFields.get(schema);
  if (field === undefined) {
    field =
      schema.fields.find(
        (f) => f.fieldKind === "list" && f.listKind === "message" && f.message.typeName === SpanSchema.typeName,
      ) ?? null;
    spanFields.set(schema, field);
  }
  return field;
}

/**
 * Remembers the bytes of each span in a request that `bytes` decoded to (for request types with a top-level
 * `repeated Span` field; others are left alone). Each occurrence of a repeated message field is one element, in
 * order, so the field's occurrences pair with the decoded list one to one.
 */
export function rememberReceivedSpans(schema: DescMessage, message: Message, bytes: Uint8Array): void {
  const field = spanListField(schema);
  if (field === null) return;
  const spans = (message as unknown as Record<string, Span[]>)[field.localName];
  if (spans === undefined || spans.length === 0) return;
  const slices: Uint8Array[] = [];
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === field.number && wireType === WireType.LengthDelimited) slices.push(reader.bytes());
    else reader.skip(wireType, number);
  }
  if (slices.length !== spans.length) return;
  spans.forEach((span, i) => received.set(span, { bytes: slices[i]!, sequenceId: span.sequenceId }));
}

/** A shallow copy of a span (to change its sequence id) that keeps the bytes it was received in. */
export function copySpan(span: Span): Span {
  const copy = { ...span };
  const bytes = received.get(span);
  if (bytes) received.set(copy, bytes);
  return copy;
}

/** The span's protobuf binary: its received bytes where it has them (only its sequence id may have changed since). */
export function encodeSpan(span: Span): Uint8Array {
  const original = received.get(span);
  if (original === undefined) return toBinary(SpanSchema, span);
  if (original.sequenceId === span.sequenceId) return original.bytes;
  const sequenceId = new BinaryWriter().tag(sequenceIdField, WireType.Varint).uint32(span.sequenceId).finish();
  const data = new Uint8Array(original.bytes.length + sequenceId.length);
  data.set(original.bytes);
  data.set(sequenceId, original.bytes.length);
  return data;
}
