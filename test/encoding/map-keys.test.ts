import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { decodeMessage } from "../../src/encoding/generated-decoder.js";
import { AttributeValueSchema, SpanSchema, WorkerSchema } from "../../src/gen/agl/v1/types_pb.js";
import { createPrng } from "../support/fuzz/prng.js";

/** A span whose attributes have these names, each with its index as the value. */
function spanWith(names: readonly string[]): Uint8Array {
  const attributes = Object.fromEntries(
    names.map((name, i) => [name, create(AttributeValueSchema, { value: { case: "intValue", value: BigInt(i) } })]),
  );
  return toBinary(SpanSchema, create(SpanSchema, { spanId: "s", attributes }));
}

describe("map keys read once and given back", () => {
  it("decodes the same keys again, in any order and past the table's size, as fromBinary does", () => {
    const rng = createPrng(20261206);
    const alphabet = "abcdefghijklmnopqrstuvwxyz._0123456789";
    // More distinct keys than the table holds, of every length up to past the longest it keeps (64 bytes).
    const names = Array.from({ length: 3000 }, (_, i) => {
      const length = 1 + (i % 70);
      return Array.from({ length }, () => rng.pick([...alphabet])).join("");
    });
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < names.length; i += 50) {
        const bytes = spanWith(names.slice(i, i + 50 + round));
        expect(decodeMessage(SpanSchema, bytes)).toStrictEqual(fromBinary(SpanSchema, bytes));
      }
    }
    // Keys that differ only in their first two characters: many share a slot of the table with one another.
    const alike = [...alphabet].flatMap((a) => [...alphabet].map((b) => `${a}${b}.gen_ai.request.model`));
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < alike.length; i += 7) {
        const bytes = spanWith([alike[i] as string, alike[alike.length - 1 - i] as string, alike[(i * 31) % alike.length] as string]);
        expect(decodeMessage(SpanSchema, bytes)).toStrictEqual(fromBinary(SpanSchema, bytes));
      }
    }
    // A key read again and again, and keys one character from it, each come back as themselves.
    const often = spanWith(["gen_ai.request.model", "gen_ai.request.modem", "gen_ai.request.mode"]);
    for (let i = 0; i < 3; i++) {
      expect(Object.keys(decodeMessage(SpanSchema, often).attributes)).toEqual([
        "gen_ai.request.model",
        "gen_ai.request.modem",
        "gen_ai.request.mode",
      ]);
    }
  });

  it("reads keys that are not ASCII, empty, or not UTF-8 as protobuf-es does", () => {
    const bytes = spanWith(["modèle", "", "名前", "x".repeat(64), "y".repeat(65)]);
    for (let i = 0; i < 2; i++) expect(decodeMessage(SpanSchema, bytes)).toStrictEqual(fromBinary(SpanSchema, bytes));
    // An attribute name of invalid UTF-8: protobuf-es refuses it, and so does the generated decoder.
    const entry = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(new Uint8Array([0x61, 0xff]))
      .finish();
    const invalid = new BinaryWriter().tag(9, WireType.LengthDelimited).bytes(entry).finish();
    expect(() => fromBinary(SpanSchema, invalid)).toThrow();
    expect(() => decodeMessage(SpanSchema, invalid)).toThrow();
  });

  it("reads a Struct's field names the same way, nested ones included", () => {
    const stats = { rss_mb: 120, uptime_s: 3, nested: { rss_mb: "x", é: true }, list: [{ uptime_s: null }] };
    const bytes = toBinary(WorkerSchema, create(WorkerSchema, { workerId: "w", heartbeatStats: stats }));
    for (let i = 0; i < 2; i++) {
      expect(decodeMessage(WorkerSchema, bytes)).toStrictEqual(fromBinary(WorkerSchema, bytes));
      expect(decodeMessage(WorkerSchema, bytes).heartbeatStats).toEqual(stats);
    }
  });
});
