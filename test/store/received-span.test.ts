/**
 * Spans the store receives are read, not decoded (src/store/received-span.ts): the fields the store reads and the
 * facts it keeps as columns come from a scan generated per type (src/encoding/generated-scanner.ts), the rest decodes
 * from the bytes on demand, and backends hand out plain spans only.
 */
import { isDeepStrictEqual } from "node:util";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { create, type DescMessage, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { decodeMessage, decodeReadingElements } from "../../src/encoding/generated-decoder.js";
import { scannerOf } from "../../src/encoding/generated-scanner.js";
import {
  AGL_ANNOTATION,
  AGL_LLM_PROMPT_TOKEN_IDS,
  AGL_LLM_RESPONSE_TOKEN_IDS,
  GEN_AI_RESPONSE_ID,
  rewardValueKey,
} from "../../src/core/semconv.js";
import { type AddSpansRequest, AddSpansRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import { type AttributeValue, AttributeValueSchema, type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { ReceivedSpan } from "../../src/store/received-span.js";
import { factAttributes, spanFacts } from "../../src/store/span-facts.js";
import { decodeKeepingSpans, encodeSpan, factsOf, spanToKeep } from "../../src/store/span-wire.js";
import { createStore } from "../../src/store/store.js";
import { contractMessages } from "../encoding/contract-messages.js";
import { mutateBytes } from "../support/fuzz/mutate.js";
import { createPrng } from "../support/fuzz/prng.js";
import { createMessageGenerator, emptyIdPool } from "../support/fuzz/random-message.js";

const text = (value: string): AttributeValue => create(AttributeValueSchema, { value: { case: "stringValue", value } });
const request = (...spans: Uint8Array[]) => {
  const w = new BinaryWriter();
  for (const span of spans) w.tag(AddSpansRequestSchema.field.spans.number, WireType.LengthDelimited).bytes(span);
  return w.finish();
};
const receive = (...spans: Uint8Array[]) => (decodeKeepingSpans(AddSpansRequestSchema, request(...spans)) as AddSpansRequest).spans;

/** A span with every field of the type set. */
function fullSpan(attributes: Record<string, AttributeValue>, name = "chat model"): Span {
  const context = { traceId: "ab".repeat(16), spanId: "cd".repeat(8), isRemote: true, traceState: { vendor: "x" } };
  return create(SpanSchema, {
    rolloutId: "ro-1",
    attemptId: "at-1",
    sequenceId: 7,
    traceId: "ab".repeat(16),
    spanId: "cd".repeat(8),
    parentId: "ef".repeat(8),
    name,
    status: { code: 2, description: "boom" },
    attributes,
    events: [{ name: "retry", timestamp: 1.5, attributes: { n: text("ü") } }],
    links: [{ context, attributes: { why: text("follows") } }],
    startTime: 1.25,
    endTime: 2.5,
    context,
    parent: { ...context, spanId: "ef".repeat(8) },
    resource: { attributes: { "service.name": text("agent") }, schemaUrl: "https://example.test/schema" },
  });
}

describe("received spans", () => {
  it("reads a span with every field of its type, and gives back exactly that span", () => {
    const span = fullSpan({
      [AGL_LLM_RESPONSE_TOKEN_IDS]: create(AttributeValueSchema, { value: { case: "intArray", value: { values: [5n, 6n] } } }),
    });
    // Each field set: a field added to Span that the read does not know makes it decline, and this test fail.
    const unset = SpanSchema.fields.filter(
      (field) => toBinary(SpanSchema, create(SpanSchema, { [field.localName]: span[field.localName as keyof Span] })).length === 0,
    );
    expect(unset.map((field) => field.name)).toEqual([]);
    const [received] = receive(toBinary(SpanSchema, span));
    expect(received).toBeInstanceOf(ReceivedSpan);
    for (const field of SpanSchema.fields) {
      expect(received?.[field.localName as keyof Span], field.name).toEqual(span[field.localName as keyof Span]);
    }
    expect((received as ReceivedSpan).toPlain()).toEqual(span);
    expect(factsOf(received as Span)).toEqual({
      reward: null,
      promptTokens: 0,
      responseTokens: 2,
      llmCallKey: `span:at-1/${"cd".repeat(8)}`,
    });
  });

  it("takes the facts from the attributes they read, wherever they are and whatever else is there", () => {
    const ints = (...values: bigint[]) => create(AttributeValueSchema, { value: { case: "intArray", value: { values } } });
    const number = (value: number) => create(AttributeValueSchema, { value: { case: "doubleValue", value } });
    const cases: Array<[Record<string, AttributeValue>, string?]> = [
      [{ [rewardValueKey(0)]: number(0.5), [AGL_LLM_PROMPT_TOKEN_IDS]: ints(1n, 2n, 3n), [AGL_LLM_RESPONSE_TOKEN_IDS]: ints(4n) }],
      [{ [rewardValueKey(0)]: create(AttributeValueSchema, { value: { case: "intValue", value: -2n } }) }],
      [{ "agentops.task.output": text(JSON.stringify({ type: "reward", value: 0.25 })) }],
      [{ "agentops.entity.output": text("{not json") }],
      [{ reward: number(1) }, AGL_ANNOTATION],
      [{ reward: number(1) }, "not an annotation"],
      // Keys as long as a fact's, that are not one; a fact's key with no value; a reward that is not finite.
      [
        {
          "agentlightning.reward.0.vaLue": number(3),
          "agl.llm.prompt_token_idz": ints(1n),
          [rewardValueKey(0)]: create(AttributeValueSchema),
        },
      ],
      [{ [rewardValueKey(0)]: number(Number.POSITIVE_INFINITY), [AGL_LLM_PROMPT_TOKEN_IDS]: ints(9n) }],
      // The call's response id, kept only beside response token ids.
      [{ [GEN_AI_RESPONSE_ID]: text("chatcmpl-1"), [AGL_LLM_RESPONSE_TOKEN_IDS]: ints(4n), "gen_ai.response.model": text("m") }],
      [{ [GEN_AI_RESPONSE_ID]: text("chatcmpl-2"), [AGL_LLM_PROMPT_TOKEN_IDS]: ints(1n) }],
      [{ [GEN_AI_RESPONSE_ID]: number(3), [AGL_LLM_RESPONSE_TOKEN_IDS]: ints(4n) }],
    ];
    for (const [attributes, name] of cases) {
      const span = fullSpan(attributes, name);
      const [received] = receive(toBinary(SpanSchema, span));
      expect(received).toBeInstanceOf(ReceivedSpan);
      expect(factsOf(received as Span), JSON.stringify(Object.keys(attributes))).toEqual(spanFacts(span));
    }
    // A key given twice in one map entry, and an entry given twice: the last wins, as in every decoder.
    const entry = (key: string, value: AttributeValue) =>
      new BinaryWriter()
        .tag(1, WireType.LengthDelimited)
        .string(key)
        .tag(2, WireType.LengthDelimited)
        .bytes(toBinary(AttributeValueSchema, value))
        .finish();
    const twiceKeyed = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .string("other")
      .tag(1, WireType.LengthDelimited)
      .string(rewardValueKey(0))
      .tag(2, WireType.LengthDelimited)
      .bytes(toBinary(AttributeValueSchema, number(0.75)))
      .finish();
    const bytes = new BinaryWriter()
      .tag(SpanSchema.field.spanId.number, WireType.LengthDelimited)
      .string("s")
      .tag(SpanSchema.field.attributes.number, WireType.LengthDelimited)
      .bytes(entry(rewardValueKey(0), number(0.1)))
      .tag(SpanSchema.field.attributes.number, WireType.LengthDelimited)
      .bytes(twiceKeyed)
      .finish();
    const [received] = receive(bytes);
    expect(received).toBeInstanceOf(ReceivedSpan);
    expect(factsOf(received as Span).reward).toBe(0.75);
    expect(factsOf(received as Span)).toEqual(spanFacts(fromBinary(SpanSchema, bytes)));
  });

  it("knows every attribute the facts read", () => {
    const rng = createPrng(20261206);
    const generate = createMessageGenerator(rng, emptyIdPool());
    const read = new Set<string>();
    const watched = (attributes: Record<string, AttributeValue>) =>
      new Proxy(attributes, {
        get(target, key, receiver) {
          if (typeof key === "string") read.add(key);
          return Reflect.get(target, key, receiver);
        },
      });
    const responseIds = create(AttributeValueSchema, { value: { case: "intArray", value: { values: [1n] } } });
    const spans = [
      ...Array.from({ length: 200 }, () => generate.message(SpanSchema) as Span),
      fullSpan({}, AGL_ANNOTATION),
      fullSpan({ [AGL_LLM_RESPONSE_TOKEN_IDS]: responseIds }),
    ];
    for (const span of spans) spanFacts({ ...span, attributes: watched(span.attributes) });
    expect([...read].filter((key) => !factAttributes.has(key))).toEqual([]);
    expect(read.size).toBe(factAttributes.size);
  });

  it("declines, and the request decodes as protobuf-es decodes it, when the bytes are not ones the decoder reads whole", () => {
    const span = toBinary(SpanSchema, fullSpan({ a: text("b") }));
    const unknownField = new Uint8Array([...span, ...new BinaryWriter().tag(99, WireType.Varint).uint32(1).finish()]);
    const statusTwice = new Uint8Array([
      ...span,
      ...new BinaryWriter()
        .tag(8, WireType.LengthDelimited)
        .bytes(new Uint8Array([8, 1]))
        .finish(),
    ]);
    const protoKey = new BinaryWriter()
      .tag(9, WireType.LengthDelimited)
      .bytes(new BinaryWriter().tag(1, WireType.LengthDelimited).string("__proto__").finish())
      .finish();
    // Every singular message field met twice (protobuf-es merges the two; the generated decoder leaves that to it).
    const full = fullSpan({});
    const twice = SpanSchema.fields
      .filter((field) => field.fieldKind === "message")
      .map((field) => {
        const value = full[field.localName as keyof Span] as Message;
        const again = new BinaryWriter().tag(field.number, WireType.LengthDelimited).bytes(toBinary(field.message as DescMessage, value));
        return new Uint8Array([...span, ...again.finish()]);
      });
    expect(twice.length).toBeGreaterThanOrEqual(4);
    for (const bytes of [unknownField, statusTwice, protoKey, ...twice]) {
      const [received] = receive(bytes);
      expect(received).not.toBeInstanceOf(ReceivedSpan);
      expect(received).toEqual(fromBinary(SpanSchema, bytes));
    }
    // Invalid UTF-8 deep inside (an event's attribute): refused as protobuf-es refuses it.
    const bad = toBinary(SpanSchema, fullSpan({}));
    const at = Buffer.from(bad).indexOf(Buffer.from("ü"));
    bad[at] = 0xff;
    expect(() => fromBinary(SpanSchema, bad)).toThrow();
    expect(() => receive(bad)).toThrow();
  });

  it("accepts only what the generated decoder reads whole, for every message type of the contract (random and damaged)", () => {
    const rng = createPrng(20261207);
    const generate = createMessageGenerator(rng, emptyIdPool());
    let accepted = 0;
    let valid = 0;
    for (const schema of contractMessages) {
      const scan = scannerOf(schema);
      if (scan === null) continue;
      for (let i = 0; i < 30; i++) {
        const whole = toBinary(schema, generate.message(schema));
        for (const [n, bytes] of [whole, mutateBytes(rng, whole), mutateBytes(rng, whole)].entries()) {
          let ok: boolean;
          try {
            ok = scan(new BinaryReader(bytes), bytes, bytes.length, 1);
          } catch {
            ok = false;
          }
          if (n === 0 && ok) valid++;
          if (!ok) continue;
          accepted++;
          // No element is read by another reader: undefined here means the generated decoder fell back.
          const read = decodeReadingElements(schema, bytes, { number: -1, read: () => undefined });
          if (read === undefined || !isDeepStrictEqual(read, fromBinary(schema, bytes))) {
            expect.fail(
              `${schema.typeName}: the scan accepted ${Buffer.from(bytes).toString("hex")}, which the decoder does not read whole`,
            );
          }
          expect(decodeMessage(schema, bytes)).toEqual(read);
        }
      }
    }
    expect(accepted).toBeGreaterThan(1_000);
    // What agl's encoders write is accepted (types whose random values nest deeper than the limit aside).
    expect(valid).toBeGreaterThan(0.95 * contractMessages.filter((m) => scannerOf(m) !== null).length * 30);
  });

  it("is kept with bytes of its own, not a view that holds the whole request", () => {
    const bytes = [fullSpan({ a: text("x") }), fullSpan({ b: text("y") }, "other")].map((span) => toBinary(SpanSchema, span));
    // In a larger buffer, as a request is when it is read from a connection.
    const whole = request(...bytes);
    const inRead = new Uint8Array(64 << 10);
    inRead.set(whole, 100);
    const [first, second] = (decodeKeepingSpans(AddSpansRequestSchema, inRead.subarray(100, 100 + whole.length)) as AddSpansRequest)
      .spans as [ReceivedSpan, Span];
    expect(first).toBeInstanceOf(ReceivedSpan);
    first.sequenceId = 9; // as the store assigns one
    const kept = spanToKeep(first) as ReceivedSpan;
    expect(kept).toBeInstanceOf(ReceivedSpan);
    expect(kept.received.bytes.buffer.byteLength).toBe(bytes[0]?.length);
    expect(kept.toPlain()).toEqual(first.toPlain());
    expect(fromBinary(SpanSchema, encodeSpan(kept))).toEqual(fromBinary(SpanSchema, encodeSpan(first)));
    expect(spanToKeep(second)?.sequenceId).toBe(7);
    // Decoded whole (a request the generated decoder declines: the status met twice), the span holds a view of its
    // bytes under a symbol; the one kept is a copy without it. A span built in this process is not kept at all.
    const statusTwice = request(new Uint8Array([...(bytes[0] as Uint8Array), 0x42, 2, 8, 1]));
    const [decoded] = (decodeKeepingSpans(AddSpansRequestSchema, statusTwice) as AddSpansRequest).spans as [Span];
    expect(decoded).not.toBeInstanceOf(ReceivedSpan);
    expect(encodeSpan(decoded).buffer).toBe(statusTwice.buffer);
    const keptDecoded = spanToKeep(decoded) as Span;
    expect(keptDecoded).toEqual(decoded);
    expect(Object.getOwnPropertySymbols(keptDecoded)).toEqual([]);
    expect(spanToKeep(fullSpan({}))).toBeUndefined();
  });

  it("never leaves a backend: reads give plain spans (SQLite, kept and from the file; memory)", async () => {
    const spans = [fullSpan({ [rewardValueKey(0)]: text("x") }), fullSpan({})].map((span, i) =>
      toBinary(SpanSchema, { ...span, spanId: `${i}`.repeat(16) }),
    );
    for (const backend of [createSqliteBackend({ path: ":memory:" }), createMemoryBackend()]) {
      const store = createStore({ backend });
      const stopKeeping = backend.keepSpans?.();
      try {
        const rollout = await store.startRollout({});
        const [rolloutId, attemptId] = [rollout.rolloutId, rollout.latestAttempt?.attemptId as string];
        const received = receive(
          ...spans.map((bytes) => toBinary(SpanSchema, { ...fromBinary(SpanSchema, bytes), rolloutId, attemptId, sequenceId: 0 })),
        );
        expect(received.every((span) => span instanceof ReceivedSpan)).toBe(true);
        await store.addSpans({ spans: received });
        const read = (await store.querySpans({ rolloutId })).spans;
        expect(read).toHaveLength(2);
        for (const span of read) {
          expect(span).not.toBeInstanceOf(ReceivedSpan);
          expect(Object.hasOwn(span, "attributes") && Object.hasOwn(span, "status")).toBe(true);
        }
        // Filtered by name, SQLite reads them from the file.
        const filtered = (await store.querySpans({ rolloutId, name: "chat model" })).spans;
        expect(filtered.every((span) => !(span instanceof ReceivedSpan) && Object.hasOwn(span, "attributes"))).toBe(true);
        expect(filtered).toEqual(read);
        expect(read.map((span) => span.status?.description)).toEqual(["boom", "boom"]);
        expect(read.map((span) => span.sequenceId)).toEqual([1, 2]);
      } finally {
        stopKeeping?.();
        await store.close();
      }
    }
  });
});
