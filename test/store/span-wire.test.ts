import { isDeepStrictEqual } from "node:util";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import {
  type AddSpansRequest,
  AddSpansRequestSchema,
  type UpdateAttemptRequest,
  UpdateAttemptRequestSchema,
} from "../../src/gen/agl/v1/store_pb.js";
import { AttemptStatus, type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { emptyIdPool, createMessageGenerator } from "../support/fuzz/random-message.js";
import { mutateBytes } from "../support/fuzz/mutate.js";
import { createPrng, fuzzSeed } from "../support/fuzz/prng.js";
import { handWrittenSpan as handWritten } from "../support/hand-written-span.js";
import { plainSpan, ReceivedSpan } from "../../src/store/received-span.js";
import { spanFacts } from "../../src/store/span-facts.js";
import { copySpan, decodeKeepingSpans, encodeSpan, factsOf } from "../../src/store/span-wire.js";

const handWrittenSpan = (spanId: string, sequenceId = 0) =>
  handWritten({ rolloutId: "ro-1", attemptId: "at-1", spanId, name: "llm.call", sequenceId });

function requestBytes(field: number, spans: Uint8Array[], before?: (w: BinaryWriter) => void): Uint8Array {
  const w = new BinaryWriter();
  before?.(w);
  for (const span of spans) w.tag(field, WireType.LengthDelimited).bytes(span);
  return w.finish();
}

describe("span-wire: spans are stored in the bytes they arrived in", () => {
  it("gives back each received span's own bytes, which decode to the span", () => {
    const spans = [handWrittenSpan("a".repeat(16)), handWrittenSpan("b".repeat(16), 9)];
    const bytes = requestBytes(1, spans);
    const request = decodeKeepingSpans(AddSpansRequestSchema, bytes) as AddSpansRequest;

    request.spans.forEach((span, i) => {
      const stored = encodeSpan(span);
      expect(Buffer.from(stored)).toEqual(Buffer.from(spans[i]!));
      expect(Buffer.from(stored)).not.toEqual(Buffer.from(toBinary(SpanSchema, span)));
      expect(equals(SpanSchema, fromBinary(SpanSchema, stored), span)).toBe(true);
    });
  });

  it("pairs spans with their bytes when other fields come between them", () => {
    const spans = [handWrittenSpan("c".repeat(16)), handWrittenSpan("d".repeat(16))];
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).string("ro-1");
    w.tag(7, WireType.LengthDelimited).bytes(spans[0]!);
    w.tag(3, WireType.Varint).int32(AttemptStatus.SUCCEEDED);
    w.tag(7, WireType.LengthDelimited).bytes(spans[1]!);
    w.tag(2, WireType.LengthDelimited).string("at-1");
    const bytes = w.finish();
    const request = decodeKeepingSpans(UpdateAttemptRequestSchema, bytes) as UpdateAttemptRequest;

    expect(request.spans.map((span) => Buffer.from(encodeSpan(span)))).toEqual(spans.map((s) => Buffer.from(s)));
  });

  it("appends a sequence id assigned later, which decoders take over the received one; the original is untouched", () => {
    const bytes = requestBytes(1, [handWrittenSpan("e".repeat(16)), handWrittenSpan("f".repeat(16), 4)]);
    const request = decodeKeepingSpans(AddSpansRequestSchema, bytes) as AddSpansRequest;

    for (const [i, span] of request.spans.entries()) {
      const copy = copySpan(span);
      copy.sequenceId = 300 + i; // a multi-byte varint
      const stored = encodeSpan(copy);
      expect(stored.length).toBeGreaterThan(encodeSpan(span).length);
      expect(equals(SpanSchema, fromBinary(SpanSchema, stored), copy)).toBe(true);
      expect(fromBinary(SpanSchema, encodeSpan(span)).sequenceId).toBe(span.sequenceId);
    }
  });

  it("keeps no bytes from a request that only decodes leniently: a known field with another wire type than its own", () => {
    const span = handWrittenSpan("i".repeat(16));
    // rollout_id (a string) tagged as a varint: protobuf-es still reads it as a string, a scan by wire type would not.
    const lenient = new Uint8Array([
      ...new BinaryWriter().tag(1, WireType.Varint).finish(),
      4,
      ...Buffer.from("ro-1"),
      ...requestBytes(7, [span]),
    ]);
    const request = decodeKeepingSpans(UpdateAttemptRequestSchema, lenient) as UpdateAttemptRequest;
    expect([request.rolloutId, request.spans.length]).toEqual(["ro-1", 1]);
    expect(encodeSpan(request.spans[0]!)).toEqual(toBinary(SpanSchema, request.spans[0]!));
  });

  it("keeps the bytes of a request only protobuf-es reads (an unknown field) when every decoder reads them alike", () => {
    const spans = [handWrittenSpan("j".repeat(16)), handWrittenSpan("k".repeat(16))];
    const bytes = requestBytes(1, spans, (w) => w.tag(99, WireType.Varint).uint32(7));
    const request = decodeKeepingSpans(AddSpansRequestSchema, bytes) as AddSpansRequest;
    expect(request.$unknown).toHaveLength(1);
    expect(request.spans.map((span) => Buffer.from(encodeSpan(span)))).toEqual(spans.map((span) => Buffer.from(span)));
  });

  it("encodes spans it has no bytes for: built in code, or copied without copySpan", () => {
    const span = create(SpanSchema, { rolloutId: "ro-1", attemptId: "at-1", spanId: "g".repeat(16), sequenceId: 2 });
    expect(encodeSpan(span)).toEqual(toBinary(SpanSchema, span));

    const bytes = requestBytes(1, [handWrittenSpan("h".repeat(16))]);
    const request = decodeKeepingSpans(AddSpansRequestSchema, bytes) as AddSpansRequest;
    const plainCopy = { ...request.spans[0]! };
    expect(encodeSpan(plainCopy)).toEqual(toBinary(SpanSchema, plainCopy));
  });

  it("stores exactly the span that was decoded, for random and mutated requests (seeded: AGL_FUZZ_SEED replays)", () => {
    const seed = fuzzSeed();
    const rng = createPrng(seed);
    const messages = createMessageGenerator(rng, emptyIdPool());
    let kept = 0;
    let received = 0;
    for (let i = 0; i < 1_000; i++) {
      const schema = rng.chance(0.5) ? AddSpansRequestSchema : UpdateAttemptRequestSchema;
      let bytes: Uint8Array = toBinary(schema, messages.message(schema) as never);
      if (rng.chance(0.7)) bytes = mutateBytes(rng, bytes);
      let request: AddSpansRequest | UpdateAttemptRequest;
      try {
        request = decodeKeepingSpans(schema, bytes) as typeof request;
      } catch {
        continue; // refused as INVALID_ARGUMENT before anything is stored
      }
      // The request decodes as protobuf-es decodes it. Compared as values, as below: a NaN's bits are not (V8 quiets a
      // signalling NaN stored into an array of doubles), and `equals` never holds for a NaN at all.
      // Received spans (read, not decoded) are compared as the plain spans they stand for, field by field as well.
      const expected = fromBinary(schema, bytes);
      if (!isDeepStrictEqual({ ...request, spans: request.spans.map(plainSpan) }, expected))
        expect.fail(`seed ${seed}, case ${i}: decoded otherwise`);
      for (const [j, span] of request.spans.entries()) {
        const want = expected.spans[j] as Span;
        if (span instanceof ReceivedSpan) received++;
        for (const field of SpanSchema.fields) {
          if (!isDeepStrictEqual((span as Span)[field.localName as keyof Span], want[field.localName as keyof Span]))
            expect.fail(`seed ${seed}, case ${i}: ${field.name} reads otherwise`);
        }
        if (!isDeepStrictEqual(factsOf(span), spanFacts(want))) expect.fail(`seed ${seed}, case ${i}: other facts`);
        if (encodeSpan(span).buffer === bytes.buffer) kept++;
        const stored = copySpan(span);
        if (rng.chance(0.5)) stored.sequenceId = rng.int(0, 2 ** 32 - 1);
        // Read from a plain Uint8Array: bytes read from a Buffer are Buffers, which isDeepStrictEqual tells apart.
        if (!isDeepStrictEqual(fromBinary(SpanSchema, new Uint8Array(encodeSpan(stored))), plainSpan(stored)))
          expect.fail(`seed ${seed}, case ${i}: the stored span reads back different`);
      }
    }
    // Most spans take the fast path: the test checks the kept bytes, not only the fallback.
    expect(kept, `seed ${seed}`).toBeGreaterThan(200);
    expect(received, `seed ${seed}`).toBeGreaterThan(200);
  });
});
