/** Bad input, engine failures, retries and timeouts: clear errors, nothing crashes, the next call works. */
import { silentLogger } from "../../src/core/logger.js";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { attrInts, attrNumber, attrString } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { createLlmProxy } from "../../src/proxy/llm-proxy.js";
import { AttemptStatus, RolloutStatus, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { type ProxyHarness, postJson, startProxyHarness } from "../support/proxy-harness.js";
import { parseSse } from "../support/sse.js";

let h: ProxyHarness;
afterEach(() => h?.close());

const chat = { model: "fake-model", messages: [{ role: "user", content: "hi" }] };

async function expectWorks(url: string) {
  const res = await postJson(`${url}/chat/completions`, chat);
  expect(res.status).toBe(200);
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("LLM proxy: bad input", () => {
  it("answers malformed requests with OpenAI-shaped 4xx errors", async () => {
    h = await startProxyHarness();
    const { baseUrl } = await h.claim();
    const cases: [string, unknown, number, string][] = [
      ["/chat/completions", "{not json", 400, "invalid_json"],
      ["/chat/completions", "[1,2]", 400, "invalid_request"],
      ["/chat/completions", { model: "fake-model" }, 400, "invalid_request"],
      ["/completions", { model: "fake-model" }, 400, "invalid_request"],
      ["/chat/completions", { model: "other", messages: [] }, 200, ""],
    ];
    for (const [path, body, status, code] of cases) {
      const res = await postJson(`${baseUrl}${path}`, body);
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(status);
      if (code) expect((await res.json()).error).toMatchObject({ code, type: "invalid_request_error" });
      else await res.arrayBuffer();
    }
    expect((await fetch(`${baseUrl}/chat/completions`)).status).toBe(405);
    const unknown = await fetch(`${h.url}/v2/whatever`);
    expect(unknown.status).toBe(404);
    expect(h.engine.requests.map((r) => r.body.model)).toEqual(["fake-model"]); // "other" was rewritten to the one model served
    await expectWorks(baseUrl);
  });

  it("refuses unknown rollouts and attempts with 404 before reaching the engine", async () => {
    h = await startProxyHarness();
    const { rolloutId } = await h.claim();
    const noRollout = await postJson(`${h.url}/rollout/ro-000000000000/attempt/at-00000000/v1/chat/completions`, chat);
    expect(noRollout.status).toBe(404);
    expect((await noRollout.json()).error).toMatchObject({
      code: "rollout_not_found",
      message: expect.stringContaining("ro-000000000000"),
    });
    const noAttempt = await postJson(`${h.url}/rollout/${rolloutId}/attempt/at-ffffffff/v1/chat/completions`, chat);
    expect(noAttempt.status).toBe(404);
    expect((await noAttempt.json()).error.code).toBe("attempt_not_found");
    expect(h.engine.requests).toHaveLength(0);
  });

  it("refuses calls of a cancelled attempt with 409 once the store reported the cancellation", async () => {
    h = await startProxyHarness();
    const { rolloutId, attemptId, baseUrl } = await h.claim();
    await expectWorks(baseUrl);
    await h.store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED });
    await expectWorks(baseUrl); // served; its span's ack says "cancelled"
    const refused = await postJson(`${baseUrl}/chat/completions`, chat);
    expect(refused.status).toBe(409);
    expect((await refused.json()).error.code).toBe("attempt_cancelled");
    expect((await h.store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.CANCELLED);
    expect(attemptId).toBeTruthy();
  });

  it("rejects oversized bodies with 413 and requires the token when one is set", async () => {
    h = await startProxyHarness({ proxy: { maxBodyBytes: 1024, token: "s3cret" } });
    const { baseUrl } = await h.claim();
    const auth = { authorization: "Bearer s3cret" };
    const big = await postJson(`${baseUrl}/chat/completions`, { ...chat, messages: [{ role: "user", content: "x".repeat(5000) }] }, auth);
    expect(big.status).toBe(413);
    const anonymous = await postJson(`${baseUrl}/chat/completions`, chat);
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).error.message).toMatch(/bearer/);
    expect((await fetch(`${h.url}/proxy/status`)).status).toBe(401);
    expect((await postJson(`${baseUrl}/chat/completions`, chat, auth)).status).toBe(200);
  });
});

describe("LLM proxy: engine failures", () => {
  it("retries 429 and 5xx with backoff and serves the call once the engine recovers", async () => {
    h = await startProxyHarness();
    const { rolloutId, baseUrl } = await h.claim();
    h.engine.fault({ type: "status", status: 429, retryAfter: "0" }, { type: "status", status: 503 }, { type: "status", status: 500 });
    const res = await postJson(`${baseUrl}/chat/completions`, chat);
    expect(res.status).toBe(200);
    expect(h.engine.requests).toHaveLength(4);
    expect(h.proxy.status().retries).toBe(3);
    const [span] = (await h.store.querySpans({ rolloutId })).spans;
    expect(attrNumber(span!.attributes, sc.AGL_LLM_UPSTREAM_TRIES)).toBe(4);
  });

  it("passes the engine's last error through when retries run out, and non-retryable errors at once", async () => {
    h = await startProxyHarness({ proxy: { maxRetries: 1 } });
    const { rolloutId, baseUrl } = await h.claim();
    h.engine.fault(
      { type: "status", status: 503 },
      { type: "status", status: 503, retryAfter: "7", body: '{"error":{"message":"overloaded"}}' },
    );
    const res = await postJson(`${baseUrl}/chat/completions`, chat);
    expect([res.status, res.headers.get("retry-after")]).toEqual([503, "7"]);
    expect((await res.json()).error.message).toBe("overloaded");
    h.engine.fault({ type: "status", status: 422, body: '{"error":{"message":"bad sampling"}}' });
    expect((await postJson(`${baseUrl}/chat/completions`, chat)).status).toBe(422);
    expect(h.engine.requests).toHaveLength(3);
    const spans = (await h.store.querySpans({ rolloutId })).spans;
    expect(spans.map((s) => [s.status?.code, attrString(s.attributes, sc.ERROR_TYPE)])).toEqual([
      [StatusCode.ERROR, "upstream_status"],
      [StatusCode.ERROR, "upstream_status"],
    ]);
    await expectWorks(baseUrl);
  });

  it("answers 502 when the engine is down, and retries timeouts", async () => {
    h = await startProxyHarness({ proxy: { upstream: { headersTimeoutMs: 300 }, maxRetries: 2 } });
    const { baseUrl } = await h.claim();
    h.engine.fault({ type: "stall", ms: 1_000 }, { type: "close" });
    expect((await postJson(`${baseUrl}/chat/completions`, chat)).status).toBe(200);
    expect(h.engine.requests).toHaveLength(3);
    // A connection closed without ever answering is a failed try, not a stale kept-alive one sent again for free.
    expect(h.proxy.status().retries).toBe(2);

    const down = createLlmProxy({
      store: h.store,
      pendingWrites: h.store.pendingWrites,
      backends: [{ endpoint: `http://127.0.0.1:${await deadPort()}/v1`, model: "fake-model" }],
      maxRetries: 2,
      backoffBaseMs: 5,
      logger: silentLogger,
    });
    const downUrl = await down.listen(0);
    try {
      const { rolloutId, attemptId } = await h.claim();
      const res = await postJson(`${downUrl}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`, chat);
      expect(res.status).toBe(502);
      expect((await res.json()).error).toMatchObject({
        code: "engine_unavailable",
        message: expect.stringMatching(/3 tries.*ECONNREFUSED/),
      });
      const [span] = (await h.store.querySpans({ rolloutId })).spans;
      expect(span?.status?.code).toBe(StatusCode.ERROR);
    } finally {
      await down.close();
    }
  });

  it("ends a stream the engine broke with an error event, keeping the partial ids, and stays up", async () => {
    h = await startProxyHarness({ engine: { tokensPerChunk: 2 } });
    const { rolloutId, baseUrl } = await h.claim();
    h.engine.fault({ type: "break", afterChunks: 4 });
    const res = await postJson(`${baseUrl}/chat/completions`, { ...chat, stream: true });
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    expect(events).not.toContain("[DONE]");
    expect(JSON.parse(events.at(-1) as string).error.code).toBe("engine_broke_off");
    const [span] = (await h.store.querySpans({ rolloutId })).spans;
    expect(span?.status?.code).toBe(StatusCode.ERROR);
    expect(attrInts(span!.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toHaveLength(6);
    await expectWorks(baseUrl);
  });

  it("passes an error event of the engine's stream on, and records the call as the engine's error", async () => {
    h = await startProxyHarness({ engine: { tokensPerChunk: 2 } });
    const { rolloutId, baseUrl } = await h.claim();
    h.engine.fault({ type: "error-event", afterChunks: 3, message: "out of KV cache" });
    const res = await postJson(`${baseUrl}/chat/completions`, { ...chat, stream: true });
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    expect(events.at(-1)).toBe("[DONE]");
    expect(JSON.parse(events.at(-2) as string).error.message).toBe("out of KV cache");
    const [span] = (await h.store.querySpans({ rolloutId })).spans;
    expect(span?.status?.code).toBe(StatusCode.ERROR);
    expect(attrString(span!.attributes, sc.ERROR_TYPE)).toBe("engine_error");
    expect(attrInts(span!.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toHaveLength(4);
    await expectWorks(baseUrl);
  });

  it("stops the engine's stream when the client leaves, and records the call as disconnected", async () => {
    h = await startProxyHarness({ engine: { tokensPerChunk: 1, chunkDelayMs: 20 } });
    const { rolloutId, baseUrl } = await h.claim();
    const res = await postJson(`${baseUrl}/chat/completions`, { ...chat, stream: true });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    await expect.poll(async () => (await h.store.querySpans({ rolloutId })).spans.length).toBe(1);
    const [span] = (await h.store.querySpans({ rolloutId })).spans;
    expect(attrString(span!.attributes, sc.ERROR_TYPE)).toBe("client_disconnected");
    expect(h.proxy.status().inFlight).toBe(0);
    await expectWorks(baseUrl);
  });

  it("stops asking an engine for token ids once it rejects the field", async () => {
    h = await startProxyHarness({ engine: { supportsTokenIds: false } });
    const { rolloutId, baseUrl } = await h.claim();
    await expectWorks(baseUrl);
    await expectWorks(baseUrl);
    expect(h.engine.requests.map((r) => r.body.return_token_ids)).toEqual([true, undefined, undefined]);
    const spans = (await h.store.querySpans({ rolloutId })).spans;
    expect(spans.map((s) => attrInts(s.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS))).toEqual([undefined, undefined]);
  });
});
