/** The span shipper against a real store server, through a TCP proxy that loses answers and stalls. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Logger } from "../../src/core/logger.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createSpanShipper } from "../../src/tracer/span-shipper.js";
import { type FlakyTcpProxy, startFlakyTcpProxy } from "../support/flaky-tcp-proxy.js";
import { claimAttempt, makeSpans, type StoreHarness, startStoreHarness } from "../support/store-harness.js";

let h: StoreHarness;
let proxy: FlakyTcpProxy;
let client: StoreClient;
beforeEach(async () => {
  h = await startStoreHarness();
  proxy = await startFlakyTcpProxy(h.url);
  // HTTP/1.1 (Connect) through the proxy, and no retries of its own: the shipper's retries are under test.
  client = createStoreClient({ baseUrl: proxy.url, protocol: "connect", maxTries: 1 });
});
afterEach(async () => {
  client.close();
  await proxy.close();
  await h.close();
});

function capturingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, debug() {}, info() {}, warn: (m: string) => void warnings.push(m), error: (m: string) => void warnings.push(m) };
}

describe("span shipper", () => {
  it("retries batches whose answer was lost, and the store never holds a span twice", async () => {
    const ids = await claimAttempt(h.client);
    const shipper = createSpanShipper({ store: client, batchSize: 50, lingerMs: 10, retryBaseMs: 10, maxInFlight: 1 });
    proxy.loseNextAnswers(2);
    shipper.enqueue(makeSpans(ids, 120));
    await shipper.flush();
    const stats = shipper.stats();
    expect(proxy.lost).toBe(2);
    expect(stats.retries).toBeGreaterThanOrEqual(2);
    // The lost answers' batches had been stored: their retries were acknowledged as duplicates.
    expect(stats.duplicates).toBeGreaterThanOrEqual(50);
    expect(stats.dropped).toBe(0);
    const { spans } = await h.client.querySpans({ rolloutId: ids.rolloutId });
    expect(spans).toHaveLength(120);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(120);
    expect(new Set(spans.map((s) => s.sequenceId)).size).toBe(120);
  });

  it("bounds memory while the store is stalled: drops are counted per attempt, logged, and never silent", async () => {
    const ids = await claimAttempt(h.client);
    const logger = capturingLogger();
    const shipper = createSpanShipper({
      store: client,
      batchSize: 50,
      lingerMs: 10,
      maxQueued: 100,
      maxInFlight: 2,
      maxTries: 2,
      retryBaseMs: 10,
      callTimeoutMs: 200,
      logger,
    });
    proxy.stall(true);
    shipper.enqueue(makeSpans(ids, 300));
    expect(shipper.stats().dropped).toBe(200);
    expect(logger.warnings.join("\n")).toMatch(/dropped 200 span\(s\).*more than 100 spans are waiting/);
    await shipper.flush();
    expect(shipper.stats().dropped).toBe(300);
    expect(await shipper.settle(ids.rolloutId, ids.attemptId)).toEqual({ dropped: 300 });
    proxy.dropConnections();
    proxy.stall(false);
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(0);
    // Once the store answers again, spans flow.
    shipper.enqueue(makeSpans(ids, 10, "t"));
    await shipper.flush();
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(10);
  });

  it("keeps retrying through an outage, however many tries it takes, and gives up only after retryForMs", async () => {
    const ids = await claimAttempt(h.client);
    const logger = capturingLogger();
    // Every try waits out its 100 ms deadline while the network is stalled; however long the machine takes to get
    // through seven of them, nothing is dropped.
    const patient = createSpanShipper({ store: client, batchSize: 50, lingerMs: 10, retryBaseMs: 10, callTimeoutMs: 100, logger });
    proxy.stall(true);
    patient.enqueue(makeSpans(ids, 40));
    await vi.waitFor(() => expect(patient.stats().retries).toBeGreaterThan(6), { timeout: 20_000, interval: 50 });
    expect(patient.stats()).toMatchObject({ dropped: 0, shipped: 0 });
    proxy.dropConnections();
    proxy.stall(false);
    await patient.flush();
    expect(patient.stats()).toMatchObject({ dropped: 0, shipped: 40 });
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(40);

    const brief = createSpanShipper({
      store: client,
      batchSize: 50,
      lingerMs: 10,
      retryBaseMs: 10,
      callTimeoutMs: 100,
      retryForMs: 300,
      logger,
    });
    proxy.stall(true);
    const started = Date.now();
    brief.enqueue(makeSpans(ids, 10, "b"));
    await brief.flush();
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(brief.stats()).toMatchObject({ dropped: 10, shipped: 0 });
    expect(logger.warnings.join("\n")).toMatch(/dropped 10 span\(s\).*gave up after \d+ tries \(DeadlineExceeded/);
    proxy.dropConnections();
    proxy.stall(false);
  });

  it("keeps a batch's good spans when the store refuses another attempt's, and reports acknowledged statuses", async () => {
    const ids = await claimAttempt(h.client);
    const statuses: AttemptStatus[] = [];
    const logger = capturingLogger();
    const shipper = createSpanShipper({
      store: client,
      batchSize: 100,
      lingerMs: 10,
      logger,
      onAttemptStatus: (_r, _a, s) => statuses.push(s),
    });
    const unknown = { rolloutId: "ro-000000000000", attemptId: "at-00000000" };
    shipper.enqueue([...makeSpans(ids, 5), ...makeSpans(unknown, 3, "u")]);
    await shipper.flush();
    expect((await h.client.querySpans({ rolloutId: ids.rolloutId })).spans).toHaveLength(5);
    expect(shipper.stats()).toMatchObject({ shipped: 5, dropped: 3 });
    expect(logger.warnings.join("\n")).toMatch(/dropped 3 span\(s\).*refused them \(NotFound/);
    expect(statuses).toContain(AttemptStatus.RUNNING);
    await h.client.updateRollout({ rolloutId: ids.rolloutId, status: RolloutStatus.CANCELLED });
    shipper.enqueue(makeSpans(ids, 1, "c"));
    await shipper.flush();
    expect(statuses.at(-1)).toBe(AttemptStatus.CANCELLED);
    const settled = await shipper.settle(ids.rolloutId, ids.attemptId);
    expect(settled.dropped).toBe(0);
  });

  it("settles an attempt: its queued spans and its last ones are stored at once, before its status may be reported", async () => {
    const ids = await claimAttempt(h.client);
    const other = await claimAttempt(h.client);
    const shipper = createSpanShipper({ store: client, batchSize: 100, lingerMs: 60_000 });
    shipper.enqueue([...makeSpans(ids, 5), ...makeSpans(other, 3, "o")]);
    expect(await shipper.settle(ids.rolloutId, ids.attemptId, makeSpans(ids, 2, "l"))).toEqual({ dropped: 0 });
    const stored = (await h.client.querySpans({ rolloutId: ids.rolloutId })).spans;
    expect(stored.map((s) => s.spanId).sort()).toEqual([...makeSpans(ids, 5), ...makeSpans(ids, 2, "l")].map((s) => s.spanId).sort());
    // Another attempt's spans keep waiting for their batch.
    expect(shipper.stats().queued).toBe(3);
    await shipper.flush();
    expect((await h.client.querySpans({ rolloutId: other.rolloutId })).spans).toHaveLength(3);
  });

  it("hands an attempt's queued and last spans over when they fit in a batch, after its batches in flight are stored", async () => {
    const ids = await claimAttempt(h.client);
    const shipper = createSpanShipper({ store: client, batchSize: 10, lingerMs: 60_000 });
    shipper.enqueue(makeSpans(ids, 10));
    shipper.enqueue(makeSpans(ids, 3, "q"));
    const { dropped, spans } = await shipper.handOver(ids.rolloutId, ids.attemptId, makeSpans(ids, 2, "l"));
    expect(dropped).toBe(0);
    expect(spans.map((s) => s.spanId)).toEqual([...makeSpans(ids, 3, "q"), ...makeSpans(ids, 2, "l")].map((s) => s.spanId));
    // The full batch went out as it filled and was stored before the hand-over; the handed-over ones were not sent.
    const stored = (await h.client.querySpans({ rolloutId: ids.rolloutId })).spans;
    expect(stored.map((s) => s.spanId).sort()).toEqual(
      makeSpans(ids, 10)
        .map((s) => s.spanId)
        .sort(),
    );
    expect(shipper.stats()).toMatchObject({ queued: 0, inFlight: 0, shipped: 10 });

    // More than a batch: shipped as settle does, nothing handed over.
    const big = await claimAttempt(h.client);
    const handed = await shipper.handOver(big.rolloutId, big.attemptId, makeSpans(big, 11));
    expect(handed).toEqual({ dropped: 0, spans: [] });
    expect((await h.client.querySpans({ rolloutId: big.rolloutId })).spans).toHaveLength(11);
  });
});
