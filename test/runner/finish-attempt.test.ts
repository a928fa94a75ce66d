/** Reporting an attempt's end to a real store server, when the store has already finished the attempt. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { AttemptStatus, AttributeValueSchema, RolloutStatus, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { createStoreClient } from "../../src/client/store-client.js";
import { writeSpans } from "../../src/client/span-writer.js";
import { finishAttempt } from "../../src/runner/finish-attempt.js";
import { startStoreServer } from "../../src/server/store-server.js";
import { claimAttempt, makeSpans, type StoreHarness, startStoreHarness } from "../support/store-harness.js";

let h: StoreHarness;
beforeEach(async () => {
  h = await startStoreHarness();
});
afterEach(async () => {
  await h.close();
});

function recordingLogger() {
  const messages: string[] = [];
  const record = (message: string) => void messages.push(message);
  return { messages, debug: record, info: record, warn: record, error: record };
}

describe("finishAttempt", () => {
  it("a cancelled attempt stays cancelled: the refused status is dropped once and the metadata still lands", async () => {
    const ids = await claimAttempt(h.client);
    await h.client.updateRollout({ rolloutId: ids.rolloutId, status: RolloutStatus.CANCELLED });
    const logger = recordingLogger();
    await finishAttempt(h.client, {
      ...ids,
      outcome: { end: "failed", error: { type: "Error", message: "boom" }, spans: [], lateSpans: 0, agentMs: 1 },
      droppedSpans: 2,
      metadata: { kept: true },
      settledByStore: false,
      retryForMs: 5_000,
      logger,
    });
    const [attempt] = (await h.client.queryAttempts({ rolloutId: ids.rolloutId })).attempts;
    expect(attempt?.status).toBe(AttemptStatus.CANCELLED);
    expect(attempt?.metadata).toMatchObject({ kept: true, spans_dropped: 2, error: { type: "Error", message: "boom" } });
    expect((await h.client.getRollout({ rolloutId: ids.rolloutId })).status).toBe(RolloutStatus.CANCELLED);
    expect(logger.messages.filter((m) => m.includes("stays cancelled"))).toHaveLength(1);
  });

  it("stores the last spans with the end, in one call", async () => {
    const ids = await claimAttempt(h.client);
    await finishAttempt(h.client, {
      ...ids,
      outcome: { end: "succeeded", spans: [], lateSpans: 0, agentMs: 1 },
      droppedSpans: 0,
      spans: makeSpans(ids, 3),
      shipApart: () => Promise.reject(new Error("not expected")),
      metadata: {},
      settledByStore: false,
      retryForMs: 5_000,
      logger: recordingLogger(),
    });
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans.map((s) => s.spanId)).toEqual(
      makeSpans(ids, 3).map((s) => s.spanId),
    );
    expect((await h.client.getRollout({ rolloutId: ids.rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
  });

  it("spans the store refuses with the end are sent apart, the refused ones counted, and the end still lands", async () => {
    const ids = await claimAttempt(h.client);
    const good = makeSpans(ids, 2);
    const bad = { ...makeSpans(ids, 1, "b")[0]!, spanId: "" };
    const apart: string[][] = [];
    const logger = recordingLogger();
    await finishAttempt(h.client, {
      ...ids,
      outcome: { end: "succeeded", spans: [], lateSpans: 0, agentMs: 1 },
      droppedSpans: 1,
      spans: [...good, bad],
      // As the runner's shipper would: each span stored on its own, the refused one dropped.
      shipApart: async (spans) => {
        apart.push(spans.map((s) => s.spanId));
        await h.client.addSpans({ spans: spans.filter((s) => s.spanId !== "") });
        return spans.filter((s) => s.spanId === "").length;
      },
      metadata: {},
      settledByStore: false,
      retryForMs: 5_000,
      logger,
    });
    expect(apart).toEqual([[...good.map((s) => s.spanId), ""]]);
    expect(logger.messages.join("\n")).toMatch(/refused the last spans with the update/);
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(2);
    const [attempt] = (await h.client.queryAttempts({ rolloutId: ids.rolloutId })).attempts;
    expect(attempt?.status).toBe(AttemptStatus.SUCCEEDED);
    expect(attempt?.metadata).toMatchObject({ spans_dropped: 2 });
  });

  it("last spans too large for one message together: sent apart (split as AddSpans does), and the end lands", async () => {
    const server = await startStoreServer({ store: h.store, port: 0, maxMessageBytes: 8_192 });
    const client = createStoreClient({ baseUrl: server.url });
    try {
      const ids = await claimAttempt(client);
      const text = create(AttributeValueSchema, { value: { case: "stringValue", value: "x".repeat(3_000) } });
      const spans = makeSpans(ids, 4).map((span) => create(SpanSchema, { ...span, attributes: { text } }));
      const logger = recordingLogger();
      await finishAttempt(client, {
        ...ids,
        outcome: { end: "succeeded", spans: [], lateSpans: 0, agentMs: 1 },
        droppedSpans: 0,
        spans,
        shipApart: async (apart) => (await writeSpans(client, apart)).failed.reduce((n, f) => n + f.spans.length, 0),
        metadata: {},
        settledByStore: false,
        retryForMs: 5_000,
        logger,
      });
      expect(logger.messages.join("\n")).toMatch(/refused the last spans with the update \(.*\); sending them apart/);
      // Read through the harness's server: four such spans make an answer too large for this one.
      expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(4);
      const [attempt] = (await h.client.queryAttempts({ rolloutId: ids.rolloutId })).attempts;
      expect(attempt?.status).toBe(AttemptStatus.SUCCEEDED);
      expect(attempt?.metadata).toEqual({});
    } finally {
      client.close();
      await server.close();
    }
  });

  it("any other refusal is the caller's to handle", async () => {
    const ids = await claimAttempt(h.client);
    await expect(
      finishAttempt(h.client, {
        rolloutId: ids.rolloutId,
        attemptId: "no-such-attempt",
        outcome: { end: "succeeded", spans: [], lateSpans: 0, agentMs: 1 },
        droppedSpans: 0,
        metadata: {},
        settledByStore: false,
        retryForMs: 1_000,
        logger: recordingLogger(),
      }),
    ).rejects.toThrow(/not.?found|no-such-attempt/i);
  });
});
