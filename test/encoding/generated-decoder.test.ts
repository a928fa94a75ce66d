import { isDeepStrictEqual } from "node:util";
import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { emptyIdPool, createMessageGenerator } from "../support/fuzz/random-message.js";
import { mutateBytes } from "../support/fuzz/mutate.js";
import { createPrng } from "../support/fuzz/prng.js";
import { IntArraySchema, RolloutSchema, SpanSchema, WorkerSchema } from "../../src/gen/agl/v1/types_pb.js";
import { decodeMessage, decodeReadingElements } from "../../src/encoding/generated-decoder.js";
import { scanStrictBinary } from "../../src/encoding/strict-binary.js";
import { AddSpansRequestSchema, UpdateAttemptRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import { contractMessages } from "./contract-messages.js";

/** How deep objects and arrays nest in a value. */
const nesting = (value: unknown): number =>
  typeof value === "object" && value !== null ? 1 + Math.max(0, ...Object.values(value).map(nesting)) : 0;

/** What protobuf-es makes of the bytes, and what the generated decoder makes of them: the same value, or the same error. */
function outcomes(schema: DescMessage, bytes: Uint8Array) {
  const run = (decode: () => unknown) => {
    try {
      return { value: decode() };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  return { expected: run(() => fromBinary(schema, bytes)), actual: run(() => decodeMessage(schema, bytes)) };
}

describe("decodeMessage", () => {
  it("decodes every message type of the contract exactly as fromBinary does, whole and damaged", () => {
    const rng = createPrng(20261203);
    const generate = createMessageGenerator(rng, emptyIdPool());
    // Not an empty loop: the contract's files were found, nested types included.
    expect(contractMessages.map((m) => m.typeName)).toEqual(expect.arrayContaining(["agl.v1.Span", "agl.v1.AddSpansRequest"]));
    for (const schema of contractMessages) {
      for (let i = 0; i < 40; i++) {
        const bytes = toBinary(schema, generate.message(schema));
        for (const input of [bytes, mutateBytes(rng, bytes), mutateBytes(rng, bytes)]) {
          const { expected, actual } = outcomes(schema, input);
          if (!isDeepStrictEqual(actual, expected)) {
            expect.fail(
              `${schema.typeName} from ${Buffer.from(input).toString("hex")}: ${JSON.stringify({ expected, actual }, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}`,
            );
          }
        }
      }
    }
  });

  it("keeps protobuf-es's answer where protobuf-es merges, keeps unknown fields, or reads another wire type", () => {
    const rollout = toBinary(RolloutSchema, create(RolloutSchema, { rolloutId: "ro-1", metadata: { a: 1 }, config: { maxAttempts: 2 } }));
    // The message twice: a singular message field met twice merges, and repeated fields append.
    const twice = new Uint8Array([...rollout, ...rollout]);
    expect(decodeMessage(RolloutSchema, twice)).toStrictEqual(fromBinary(RolloutSchema, twice));
    // An unknown field is kept in $unknown.
    const unknown = new Uint8Array([...rollout, ...new BinaryWriter().tag(99, WireType.Varint).uint32(7).finish()]);
    expect(decodeMessage(RolloutSchema, unknown).$unknown).toEqual([{ no: 99, wireType: WireType.Varint, data: new Uint8Array([7]) }]);
    // A repeated scalar written one by one rather than packed.
    const unpacked = new BinaryWriter()
      .tag(1, WireType.Varint)
      .sint64(-3n)
      .tag(1, WireType.Varint)
      .sint64(1n << 40n)
      .finish();
    expect(decodeMessage(IntArraySchema, unpacked).values).toEqual([-3n, 1n << 40n]);
  });

  it("hands each element of the field asked for to its reader, with the bytes a strict scan finds", () => {
    const rng = createPrng(20261205);
    const generate = createMessageGenerator(rng, emptyIdPool());
    let given = 0;
    for (let i = 0; i < 400; i++) {
      const schema = i % 2 === 0 ? AddSpansRequestSchema : UpdateAttemptRequestSchema;
      const field = schema.field.spans;
      const whole = toBinary(schema, generate.message(schema) as never);
      const bytes = i % 4 < 2 ? whole : mutateBytes(rng, whole);
      const elements: Uint8Array[] = [];
      const read = (r: BinaryReader, b: Uint8Array, end: number) => {
        elements.push(b.subarray(r.pos, end));
        r.pos = end;
        return fromBinary(SpanSchema, elements.at(-1) as Uint8Array);
      };
      let decoded: unknown;
      try {
        decoded = decodeReadingElements(schema, bytes, { number: field.number, read });
      } catch {
        continue;
      }
      // The scan counts a map entry as a level of nesting, protobuf-es does not: past ~50 levels only the scan refuses
      // (the fuzzer's deep Struct values; the store refuses JSON nested past `maxJsonDepth`, 32, anyway).
      if (decoded === undefined || nesting(decoded) > 40) continue;
      expect(toBinary(schema, decoded as never)).toEqual(toBinary(schema, fromBinary(schema, bytes) as never));
      given++;
      const scanned: Uint8Array[] = [];
      expect(scanStrictBinary(schema, bytes, (f, value) => f === field && scanned.push(value))).toBe(true);
      expect(elements.map((e) => Buffer.from(e))).toEqual(scanned.map((e) => Buffer.from(e)));
      expect(elements).toHaveLength((decoded as { spans: unknown[] }).spans.length);
    }
    expect(given).toBeGreaterThan(200);
  });

  it("reads token ids and Struct fields to the same values protobuf-es gives, at the edges of the short paths", () => {
    const ids = [0n, 1n, -1n, 63n, -64n, 64n, (1n << 27n) - 1n, -(1n << 27n), 1n << 27n, 1n << 40n, -(1n << 62n), (1n << 63n) - 1n];
    const array = toBinary(IntArraySchema, create(IntArraySchema, { values: ids }));
    expect(decodeMessage(IntArraySchema, array).values).toEqual(ids);
    const stats = { n: 3, nested: { list: [1, "two", null, true, { deep: [] }] }, "": "empty key", __proto__x: 1 };
    const worker = toBinary(WorkerSchema, create(WorkerSchema, { workerId: "w", heartbeatStats: stats }));
    expect(decodeMessage(WorkerSchema, worker)).toStrictEqual(fromBinary(WorkerSchema, worker));
    // A truncated message fails with protobuf-es's own error.
    const span = toBinary(SpanSchema, create(SpanSchema, { spanId: "s", name: "call" }));
    expect(() => decodeMessage(SpanSchema, span.subarray(0, span.length - 1))).toThrow(/premature EOF|out of range|index out of range/);
  });
});
