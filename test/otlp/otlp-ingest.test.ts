/** OTLP/HTTP trace ingest on a real store server: protobuf (gzip) and JSON bodies, placement, errors, auth. */
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ExportTraceServiceRequestSchema } from "../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb.js";
import { createOtlpTracesHandler } from "../../src/otlp/otlp-route.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../../src/store/store.js";
import { fromAttributeValue } from "../../src/tracer/attributes.js";
import { jsonValue } from "../support/store-harness.js";

let store: Store;
let server: StoreServer;
const token = "s3cret";
beforeEach(async () => {
  store = createStore({ backend: createMemoryBackend() });
  server = await startStoreServer({ store, port: 0, token, fallback: createOtlpTracesHandler({ store, token }) });
});
afterEach(async () => {
  await server.close();
  await store.close();
});

async function claim() {
  await store.enqueueRollouts({ rollouts: [{ input: jsonValue({}) }] });
  const [r] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
  return { rolloutId: r!.rolloutId, attemptId: r!.latestAttempt!.attemptId };
}

const post = (body: string | Buffer, headers: Record<string, string>) =>
  fetch(`${server.url}/v1/traces`, { method: "POST", body, headers: { authorization: `Bearer ${token}`, ...headers } });
const kv = (key: string, value: Record<string, unknown>) => ({ key, value });

describe("OTLP trace ingest", () => {
  it("stores OTLP/JSON spans (hex ids) in the attempt named by the resource", async () => {
    const ids = await claim();
    const body = {
      resourceSpans: [
        {
          resource: {
            attributes: [
              kv("agentlightning.rollout_id", { stringValue: ids.rolloutId }),
              kv("agentlightning.attempt_id", { stringValue: ids.attemptId }),
              kv("service.name", { stringValue: "go-agent" }),
            ],
          },
          scopeSpans: [
            {
              scope: { name: "manual" },
              spans: [
                {
                  traceId: "0af7651916cd43dd8448eb211c80319c",
                  spanId: "b7ad6b7169203331",
                  parentSpanId: "00f067aa0ba902b7",
                  name: "tool.call",
                  kind: 3,
                  startTimeUnixNano: "1700000000000000000",
                  endTimeUnixNano: "1700000001500000000",
                  attributes: [
                    kv("n", { intValue: "42" }),
                    kv("ids", { arrayValue: { values: [{ intValue: 1 }, { intValue: 2 }] } }),
                    kv("meta", { kvlistValue: { values: [kv("k", { boolValue: true })] } }),
                    kv("agentlightning.span_sequence_id", { intValue: "9" }),
                    kv("__proto__", { stringValue: "an attribute like any other" }),
                  ],
                  events: [{ name: "retry", timeUnixNano: "1700000000500000000", attributes: [] }],
                  status: { code: 2, message: "tool failed" },
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await post(JSON.stringify(body), { "content-type": "application/json" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    const { spans } = await store.querySpans({ rolloutId: ids.rolloutId });
    expect(spans).toHaveLength(1);
    const [span] = spans;
    expect(span).toMatchObject({
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      parentId: "00f067aa0ba902b7",
      name: "tool.call",
      sequenceId: 9,
      startTime: 1_700_000_000,
      endTime: 1_700_000_001.5,
    });
    expect(span?.status).toMatchObject({ code: 2, description: "tool failed" });
    expect(fromAttributeValue(span?.attributes.n)).toBe(42);
    expect(fromAttributeValue(span?.attributes.ids)).toEqual([1, 2]);
    expect(fromAttributeValue(span?.attributes["meta.k"])).toBe(true);
    expect(Object.getPrototypeOf(span?.attributes)).toBe(Object.prototype);
    expect(fromAttributeValue(Object.getOwnPropertyDescriptor(span?.attributes, "__proto__")?.value)).toBe("an attribute like any other");
    expect(fromAttributeValue(span?.resource?.attributes["service.name"])).toBe("go-agent");
    expect(span?.events.map((e) => [e.name, e.timestamp])).toEqual([["retry", 1_700_000_000.5]]);
  });

  it("takes gzip protobuf, lets span attributes override the resource, and reports unplaceable spans", async () => {
    const first = await claim();
    const second = await claim();
    const attr = (key: string, value: string) => ({ key, value: { value: { case: "stringValue" as const, value } } });
    const span = (name: string, spanByte: number, attributes: ReturnType<typeof attr>[] = []) => ({
      traceId: new Uint8Array(16).fill(1),
      spanId: new Uint8Array(8).fill(spanByte),
      name,
      startTimeUnixNano: 1_700_000_000_000_000_000n,
      endTimeUnixNano: 1_700_000_000_100_000_000n,
      attributes,
    });
    const request = create(ExportTraceServiceRequestSchema, {
      resourceSpans: [
        {
          resource: {
            attributes: [attr("agentlightning.rollout_id", first.rolloutId), attr("agentlightning.attempt_id", first.attemptId)],
          },
          scopeSpans: [
            {
              spans: [
                span("a", 2),
                span("b", 3, [attr("agentlightning.rollout_id", second.rolloutId), attr("agentlightning.attempt_id", second.attemptId)]),
              ],
            },
          ],
        },
        { scopeSpans: [{ spans: [span("orphan", 4)] }] },
      ],
    });
    const body = gzipSync(toBinary(ExportTraceServiceRequestSchema, request));
    const res = await post(body, { "content-type": "application/x-protobuf", "content-encoding": "gzip" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-protobuf");
    expect((await store.querySpans({ rolloutId: first.rolloutId })).spans.map((s) => s.name)).toEqual(["a"]);
    expect((await store.querySpans({ rolloutId: second.rolloutId })).spans.map((s) => [s.name, s.spanId])).toEqual([
      ["b", "0303030303030303"],
    ]);
    // The partial success names the orphan: rejected_spans = 1 (field 1 of partial_success, field 1 of the response).
    const answer = Buffer.from(await res.arrayBuffer());
    expect(answer[0]).toBe(0x0a);
    expect(answer.includes(Buffer.from("has no agentlightning.rollout_id"))).toBe(true);
    // A retried export stores nothing twice.
    await post(body, { "content-type": "application/x-protobuf", "content-encoding": "gzip" });
    expect((await store.getStatistics({})).totalSpans).toBe(2);
  });

  it("answers bad requests with clear errors and needs the store's token", async () => {
    const noToken = await fetch(`${server.url}/v1/traces`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    expect(noToken.status).toBe(401);
    const wrongType = await post("x", { "content-type": "text/plain" });
    expect(wrongType.status).toBe(415);
    const garbage = await post("{not json", { "content-type": "application/json" });
    expect(garbage.status).toBe(400);
    expect((await garbage.json()).message).toMatch(/cannot parse the OTLP traces payload/);
    const badGzip = await post("plain", { "content-type": "application/x-protobuf", "content-encoding": "gzip" });
    expect(badGzip.status).toBe(400);
    const metrics = await fetch(`${server.url}/v1/metrics`, { method: "POST", body: "" });
    expect(metrics.status).toBe(501);
    const empty = await post("", { "content-type": "application/x-protobuf" });
    expect(empty.status).toBe(200);
  });
});
