import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { AddSpansRequestSchema } from "../gen/agl/v1/store_pb.js";
import { IntArraySchema, SpanSchema } from "../gen/agl/v1/types_pb.js";
import { scanStrictBinary } from "./strict-binary.js";

const span = create(SpanSchema, {
  rolloutId: "ro-1",
  attemptId: "at-1",
  spanId: "a".repeat(16),
  name: "llm.call",
  startTime: 1.5,
  attributes: {
    text: { value: { case: "stringValue", value: "héllo" } },
    ids: { value: { case: "intArray", value: { values: [1n, -2n, 300n] } } },
    scores: { value: { case: "doubleArray", value: { values: [0.5, 1] } } },
  },
  events: [{ name: "first token", attributes: { n: { value: { case: "intValue", value: 1n } } } }],
});

/** A span attribute map entry whose value is written by `value`. */
function spanWithAttribute(value: (w: BinaryWriter) => void): Uint8Array {
  const attribute = new BinaryWriter();
  value(attribute);
  const entry = new BinaryWriter().tag(1, WireType.LengthDelimited).string("key");
  entry.tag(2, WireType.LengthDelimited).bytes(attribute.finish());
  return new BinaryWriter().tag(1, WireType.LengthDelimited).string("ro-1").tag(9, WireType.LengthDelimited).bytes(entry.finish()).finish();
}

describe("scanStrictBinary", () => {
  it("accepts what protobuf-es writes, at every depth, and hands over each top-level message field's bytes", () => {
    const request = create(AddSpansRequestSchema, { spans: [span, { ...span, spanId: "b".repeat(16) }] });
    const seen: Uint8Array[] = [];
    expect(scanStrictBinary(AddSpansRequestSchema, toBinary(AddSpansRequestSchema, request), (_f, v) => seen.push(v))).toBe(true);
    expect(seen.map((bytes) => fromBinary(SpanSchema, bytes).spanId)).toEqual(["a".repeat(16), "b".repeat(16)]);
  });

  it("accepts repeated scalars packed or one by one, and unknown fields of any wire type, groups included", () => {
    const unpacked = new BinaryWriter();
    for (const value of [1n, -2n]) unpacked.tag(1, WireType.Varint).sint64(value);
    unpacked.tag(9, WireType.StartGroup).tag(1, WireType.Varint).int32(5).tag(9, WireType.EndGroup);
    unpacked.tag(10, WireType.Bit32).fixed32(7);
    expect(scanStrictBinary(IntArraySchema, unpacked.finish())).toBe(true);
    expect(scanStrictBinary(IntArraySchema, toBinary(IntArraySchema, create(IntArraySchema, { values: [1n, 2n] })))).toBe(true);
  });

  it("refuses a known field with another wire type than its own, even where protobuf-es decodes it", () => {
    // name (a string) as a varint tag followed by what a length-prefixed string would be: protobuf-es reads "abc".
    const bytes = new Uint8Array([...new BinaryWriter().tag(7, WireType.Varint).finish(), 3, 97, 98, 99]);
    expect(fromBinary(SpanSchema, bytes).name).toBe("abc");
    expect(scanStrictBinary(SpanSchema, bytes)).toBe(false);
    // Deep inside: an attribute's double_value (field 4) written as a varint.
    expect(
      scanStrictBinary(
        SpanSchema,
        spanWithAttribute((w) => w.tag(4, WireType.Varint).uint32(1)),
      ),
    ).toBe(false);
    expect(
      scanStrictBinary(
        SpanSchema,
        spanWithAttribute((w) => w.tag(4, WireType.Bit64).double(1)),
      ),
    ).toBe(true);
  });

  it("refuses strings that are not UTF-8, at any depth", () => {
    const invalid = new BinaryWriter()
      .tag(7, WireType.LengthDelimited)
      .bytes(new Uint8Array([0x61, 0xff, 0x62]))
      .finish();
    expect(scanStrictBinary(SpanSchema, invalid)).toBe(false);
    const invalidValue = spanWithAttribute((w) => w.tag(1, WireType.LengthDelimited).bytes(new Uint8Array([0xc3])));
    expect(scanStrictBinary(SpanSchema, invalidValue)).toBe(false);
  });

  it("refuses truncated bytes and a length that overruns its message", () => {
    const whole = toBinary(SpanSchema, span);
    expect(scanStrictBinary(SpanSchema, whole.subarray(0, whole.length - 3))).toBe(false);
    const overrun = spanWithAttribute((w) => w.tag(1, WireType.LengthDelimited).string("x"));
    overrun[overrun.length - 4]! += 2; // the attribute value's length now reaches past its map entry
    expect(scanStrictBinary(SpanSchema, overrun)).toBe(false);
  });
});
