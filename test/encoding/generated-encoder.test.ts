import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { encodeGenerated, encodeMessage } from "../../src/encoding/generated-encoder.js";
import { AttemptSchema, IntArraySchema, RolloutSchema, SpanSchema, WorkerSchema } from "../../src/gen/agl/v1/types_pb.js";
import { emptyIdPool, createMessageGenerator } from "../support/fuzz/random-message.js";
import { createPrng } from "../support/fuzz/prng.js";
import { contractMessages } from "./contract-messages.js";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** What protobuf-es writes, or its error; and what encodeMessage gives. */
function outcomes(schema: DescMessage, message: unknown) {
  const run = (encode: () => Uint8Array) => {
    try {
      return { bytes: hex(encode()) };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };
  return {
    expected: run(() => toBinary(schema, message as never)),
    actual: run(() => encodeMessage(schema, message as never)),
  };
}

describe("encodeMessage", () => {
  it("writes every message type of the contract byte for byte as toBinary does, through the generated code", () => {
    const rng = createPrng(20261204);
    const generate = createMessageGenerator(rng, emptyIdPool());
    let cases = 0;
    let generated = 0;
    for (const schema of contractMessages) {
      for (let i = 0; i < 40; i++) {
        const message = generate.message(schema);
        const expected = toBinary(schema, message);
        const bytes = encodeGenerated(schema, message);
        if (bytes !== undefined) {
          generated++;
          if (hex(bytes) !== hex(expected)) expect.fail(`${schema.typeName}: ${hex(bytes)} instead of ${hex(expected)}`);
        }
        expect(hex(encodeMessage(schema, message))).toBe(hex(expected));
        cases++;
      }
    }
    // Random values stay within each field's type, so protobuf-es is needed only for the types it must handle.
    expect(generated / cases).toBeGreaterThan(0.95);
  });

  it("writes lengths of one, two and three bytes, and keeps working after a message larger than its buffer", () => {
    for (const size of [0, 1, 42, 43, 127, 128, 300, 16_383, 16_384, 70_000, 3_000_000]) {
      const text = "é".repeat(size >> 1) + "x".repeat(size & 1);
      const rollout = create(RolloutSchema, {
        rolloutId: text,
        metadata: { text, nested: { text } },
        input: { kind: { case: "stringValue", value: text } },
      });
      expect(hex(encodeGenerated(RolloutSchema, rollout) as Uint8Array)).toBe(hex(toBinary(RolloutSchema, rollout)));
      const attempt = create(AttemptSchema, { rolloutId: "ro-1", attemptId: "at-1", sequenceId: 1 });
      expect(hex(encodeGenerated(AttemptSchema, attempt) as Uint8Array)).toBe(hex(toBinary(AttemptSchema, attempt)));
    }
  });

  it("writes token ids at the edges of the 32-bit path as protobuf-es does", () => {
    const edges = [0n, 1n, -1n, 63n, -64n, (1n << 30n) - 1n, -(1n << 30n), 1n << 30n, -(1n << 30n) - 1n, 1n << 40n, -(1n << 62n)];
    const ids = [...edges, (1n << 63n) - 1n, -(1n << 63n)];
    const array = create(IntArraySchema, { values: ids });
    expect(hex(encodeGenerated(IntArraySchema, array) as Uint8Array)).toBe(hex(toBinary(IntArraySchema, array)));
  });

  it("leaves to protobuf-es what it converts or refuses, with its result or its error", () => {
    const cases: [DescMessage, unknown][] = [
      [AttemptSchema, { ...create(AttemptSchema), sequenceId: 1.5 }], // refused: not an integer
      [AttemptSchema, { ...create(AttemptSchema), sequenceId: -1 }], // refused: not a uint32
      [AttemptSchema, { ...create(AttemptSchema), rolloutId: 7 }], // a number for a string
      [AttemptSchema, { ...create(AttemptSchema), $typeName: "agl.v1.Rollout" }], // another message type
      [RolloutSchema, { ...create(RolloutSchema), metadata: { gone: undefined, big: 1n } }], // not JSON in a Struct
      [RolloutSchema, { ...create(RolloutSchema), metadata: { holes: Object.assign([1], { 2: 3 }) } }], // a sparse array
      [RolloutSchema, { ...create(RolloutSchema), metadata: [1, 2] }], // an array for a Struct
      [IntArraySchema, { ...create(IntArraySchema), values: [1n, 2, "3"] }], // numbers and strings for int64s
      [IntArraySchema, { ...create(IntArraySchema), values: [1n << 64n] }], // out of range
      [SpanSchema, { ...create(SpanSchema), attributes: { a: create(AttemptSchema) } }], // a map value of another type
      [WorkerSchema, { ...create(WorkerSchema), lastHeartbeatTime: "1" }],
    ];
    for (const [schema, message] of cases) {
      expect(
        encodeGenerated(schema, message as never),
        `${schema.typeName} ${JSON.stringify(message, (_k, v) => (typeof v === "bigint" ? `${v}n` : v))}`,
      ).toBeUndefined();
      const { expected, actual } = outcomes(schema, message);
      expect(actual).toEqual(expected);
    }
  });

  it("writes unknown fields back after the known ones, as they came", () => {
    const attempt = create(AttemptSchema, { rolloutId: "ro-1", attemptId: "at-1" });
    const unknown = new BinaryWriter().tag(99, WireType.Varint).uint32(7).finish();
    attempt.$unknown = [{ no: 99, wireType: WireType.Varint, data: unknown.subarray(2) }];
    expect(hex(encodeGenerated(AttemptSchema, attempt) as Uint8Array)).toBe(hex(toBinary(AttemptSchema, attempt)));
  });
});
