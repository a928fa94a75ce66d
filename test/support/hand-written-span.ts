import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * The bytes of a span written by hand: fields in reverse order and an unknown field (99) first, which no encoder here
 * produces. A sequence id of 0 leaves the field out.
 */
export function handWrittenSpan(spec: {
  rolloutId: string;
  attemptId: string;
  spanId: string;
  name: string;
  sequenceId?: number;
}): Uint8Array {
  const w = new BinaryWriter();
  w.tag(99, WireType.LengthDelimited).string("from a newer client");
  w.tag(7, WireType.LengthDelimited).string(spec.name);
  w.tag(5, WireType.LengthDelimited).string(spec.spanId);
  if (spec.sequenceId) w.tag(3, WireType.Varint).uint32(spec.sequenceId);
  w.tag(2, WireType.LengthDelimited).string(spec.attemptId);
  w.tag(1, WireType.LengthDelimited).string(spec.rolloutId);
  return w.finish();
}
