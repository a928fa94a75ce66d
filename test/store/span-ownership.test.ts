/**
 * Who owns a stored span's objects (src/store/span-wire.ts, `handOver`): the memory backend keeps a span received as
 * bytes in its own copy of them (decoded for each read) and a span handed over by its builder (as the proxy's are) as
 * it is, copies any other, and hands those out frozen through: no reader and no caller can change what another reads.
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { attr } from "../../src/adapter/attributes.js";
import { type AddSpansRequest, AddSpansRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import { type IntArray, type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { ReceivedSpan } from "../../src/store/received-span.js";
import { copySpan, decodeKeepingSpans, handOver, isHandedOver } from "../../src/store/span-wire.js";
import { createStore, type Store } from "../../src/store/store.js";
import { claimAttempt } from "../support/store-harness.js";

let store: Store;
let scope: { rolloutId: string; attemptId: string };
beforeEach(async () => {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  scope = await claimAttempt(store);
});
afterEach(() => store.close());

const span = (spanId: string) =>
  create(SpanSchema, {
    ...scope,
    spanId,
    traceId: "ab".repeat(16),
    name: "chat m",
    status: { code: 1 },
    attributes: { ids: attr.ints([1, 2, 3]), text: attr.string("hello") },
    events: [{ name: "retry", attributes: { n: attr.int(1) } }],
  });
const idsOf = (s: Span) => (s.attributes.ids?.value.value as IntArray | undefined)?.values ?? [];
const readBack = async (spanId: string) => {
  const { spans } = await store.querySpans({ rolloutId: scope.rolloutId, spanId });
  expect(spans).toHaveLength(1);
  return spans[0] as Span;
};
/** Every object in `value` frozen (bytes cannot be). */
const frozenThrough = (value: unknown): boolean =>
  value === null ||
  typeof value !== "object" ||
  ArrayBuffer.isView(value) ||
  (Object.isFrozen(value) && Object.values(value).every(frozenThrough));

describe("the memory backend's spans", () => {
  it("keeps a span handed over without copying it, and hands it out frozen through", async () => {
    const built = handOver(span("s1"));
    expect(isHandedOver(built)).toBe(true);
    expect(isHandedOver(copySpan(built))).toBe(true);
    await store.addSpans({ spans: [built] });

    const read = await readBack("s1");
    expect(read.attributes).toBe(built.attributes);
    expect(read.sequenceId).toBe(1);
    expect(built.sequenceId).toBe(0); // the caller's own message is not changed
    expect(frozenThrough(read)).toBe(true);
    expect(() => idsOf(read).push(4n)).toThrow(TypeError);
    expect(() => {
      (read.attributes.text?.value as { value: string }).value = "changed";
    }).toThrow(TypeError);
    expect(idsOf(await readBack("s1"))).toEqual([1n, 2n, 3n]);
  });

  it("copies a span its caller still holds: what the caller changes after is not stored", async () => {
    const mine = span("s2");
    expect(isHandedOver(mine)).toBe(false);
    await store.addSpans({ spans: [mine] });
    idsOf(mine).push(4n);
    (mine.attributes.text?.value as { value: string }).value = "changed";
    mine.events.length = 0;

    const read = await readBack("s2");
    expect(read.attributes).not.toBe(mine.attributes);
    expect(idsOf(read)).toEqual([1n, 2n, 3n]);
    expect(read.attributes.text?.value.value).toBe("hello");
    expect(read.events.map((e) => e.name)).toEqual(["retry"]);
    expect(frozenThrough(read)).toBe(true);
  });

  it("keeps a span received as bytes in a copy of them, and decodes it for each read", async () => {
    const w = new BinaryWriter();
    w.tag(AddSpansRequestSchema.field.spans.number, WireType.LengthDelimited).bytes(toBinary(SpanSchema, span("s3")));
    const bytes = w.finish();
    const request = decodeKeepingSpans(AddSpansRequestSchema, bytes) as AddSpansRequest;
    expect(request.spans[0]).toBeInstanceOf(ReceivedSpan);
    await store.addSpans(request);
    bytes.fill(0); // a transport may reuse the buffer a request came in

    const read = await readBack("s3");
    expect(read).not.toBeInstanceOf(ReceivedSpan);
    expect(read.sequenceId).toBe(1);
    expect(idsOf(read)).toEqual([1n, 2n, 3n]);
    expect(read.events[0]?.attributes.n?.value.value).toBe(1n);
    // Each reader gets a span of its own: what one changes, the next does not see.
    idsOf(read).push(4n);
    (read.attributes.text?.value as { value: string }).value = "changed";
    const again = await readBack("s3");
    expect(again).not.toBe(read);
    expect(idsOf(again)).toEqual([1n, 2n, 3n]);
    expect(again.attributes.text?.value.value).toBe("hello");
  });

  it("decodes none of the spans a count reads", async () => {
    const w = new BinaryWriter();
    for (const id of ["c1", "c2"])
      w.tag(AddSpansRequestSchema.field.spans.number, WireType.LengthDelimited).bytes(toBinary(SpanSchema, span(id)));
    await store.addSpans(decodeKeepingSpans(AddSpansRequestSchema, w.finish()) as AddSpansRequest);
    const decode = vi.spyOn(ReceivedSpan.prototype, "toPlain");
    const { spans, page } = await store.querySpans({ rolloutId: scope.rolloutId, page: { limit: 0 } });
    expect([spans.length, page?.total]).toEqual([0, 2]);
    expect(decode).not.toHaveBeenCalled();
    expect((await store.querySpans({ rolloutId: scope.rolloutId, page: { limit: 1 } })).spans).toHaveLength(1);
    expect(decode).toHaveBeenCalledTimes(1);
    decode.mockRestore();
  });
});
