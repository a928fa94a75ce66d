/** The proxy's happy paths: what the client receives, and the one span per call it stores. */
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import type OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { attrDoubles, attrInts, attrJson, attrNumber, attrString } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { encode } from "../support/fake-tokenizer.js";
import { type ProxyHarness, postJson, startProxyHarness } from "../support/proxy-harness.js";
import { parseSse } from "../support/sse.js";

/** The answer a span records, as the chat completion it is. */
const recordedAnswer = (attributes: Parameters<typeof attrJson>[0]) => attrJson(attributes, sc.AGL_LLM_RESPONSE) as OpenAI.ChatCompletion;

let h: ProxyHarness;
afterEach(() => h?.close());

const toolPolicy = {
  policy: (input: { tools: unknown[]; messages: { role: string }[] }) =>
    input.tools.length > 0 && input.messages.at(-1)?.role === "user"
      ? { content: "", toolCalls: [{ name: "lookup", arguments: { city: "Paris", days: 2 } }] }
      : { content: "Sunny, 24°C — enjoy! 🌞" },
};
const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];

async function spansOf(rolloutId: string) {
  return (await h.store.querySpans({ rolloutId })).spans;
}

describe("LLM proxy calls", () => {
  it("forwards a chat call, asks for ids and logprobs, and stores one span with exactly the engine's ids", async () => {
    h = await startProxyHarness();
    const { rolloutId, attemptId, baseUrl } = await h.claim();
    const res = await postJson(`${baseUrl}/chat/completions`, {
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
      temperature: 0.5,
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.choices[0].message.content).toMatch(/^Answer 0/);
    expect(h.engine.requests[0]?.body).toMatchObject({ return_token_ids: true, logprobs: true, temperature: 0.5 });

    const [span] = await spansOf(rolloutId);
    const answer = h.engine.answers[0];
    expect(span?.attemptId).toBe(attemptId);
    expect(res.headers.get("x-agl-span-id")).toBe(span?.spanId);
    const a = span?.attributes ?? {};
    expect(attrString(a, sc.AGL_LLM_SOURCE)).toBe("proxy");
    expect(attrInts(a, sc.AGL_LLM_PROMPT_TOKEN_IDS)).toEqual(answer?.promptIds);
    expect(attrInts(a, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(answer?.responseIds);
    expect(attrDoubles(a, sc.AGL_LLM_LOGPROBS)).toEqual(answer?.logprobs);
    expect(attrString(a, sc.GEN_AI_RESPONSE_ID)).toBe(answer?.responseId);
    expect(attrString(a, sc.GEN_AI_REQUEST_MODEL)).toBe("fake-model");
    expect(attrNumber(a, sc.GEN_AI_USAGE_INPUT_TOKENS)).toBe(answer?.promptIds.length);
    expect(attrNumber(a, sc.GEN_AI_REQUEST_TEMPERATURE)).toBe(0.5);
    expect(attrJson(a, sc.AGL_LLM_REQUEST)).toEqual({ model: "fake-model", messages: [{ role: "user", content: "hi" }], temperature: 0.5 });
    expect(recordedAnswer(a).choices[0]?.message.content).toBe(body.choices[0].message.content);
    expect(attrNumber(a, sc.AGL_LLM_LATENCY_MS)).toBeGreaterThan(0);
    expect(span?.status?.code).toBe(StatusCode.OK);
    expect(span?.name).toBe("chat fake-model");
  });

  it("streams chunk by chunk while assembling ids, content and tool calls", async () => {
    h = await startProxyHarness({ engine: { ...toolPolicy, tokensPerChunk: 2, chunkDelayMs: 20 } });
    const { rolloutId, baseUrl } = await h.claim();
    const started = Date.now();
    const res = await postJson(`${baseUrl}/chat/completions`, {
      model: "fake-model",
      messages: [{ role: "user", content: "weather?" }],
      tools,
      stream: true,
    });
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    const firstAt = Date.now() - started;
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      text += new TextDecoder().decode(next.value);
    }
    const total = Date.now() - started;
    // About 25 chunks at 20 ms: the first one reached the client long before the last was produced.
    expect(total - firstAt).toBeGreaterThan(200);
    const events = parseSse(text);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const args = chunks
      .flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .map((t) => t.function.arguments)
      .join("");
    expect(args).toBe('{"city":"Paris","days":2}');

    const [span] = await spansOf(rolloutId);
    const answer = h.engine.answers[0];
    expect(attrInts(span!.attributes, sc.AGL_LLM_PROMPT_TOKEN_IDS)).toEqual(answer?.promptIds);
    expect(attrInts(span!.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(answer?.responseIds);
    expect(attrDoubles(span!.attributes, sc.AGL_LLM_LOGPROBS)).toEqual(answer?.logprobs);
    const [choice] = recordedAnswer(span!.attributes).choices;
    const [call] = choice?.message.tool_calls ?? [];
    expect(call?.type === "function" && call.function).toEqual({ name: "lookup", arguments: '{"city":"Paris","days":2}' });
    expect(choice?.finish_reason).toBe("tool_calls");
    expect(attrNumber(span!.attributes, sc.AGL_LLM_TTFT_MS)).toBeLessThan(attrNumber(span!.attributes, sc.AGL_LLM_LATENCY_MS) as number);
  });

  it("reads a long stream's events as they come, leaving only the last few for after the answer", async () => {
    const content = "The quick brown fox jumps over the lazy dog. ".repeat(5);
    h = await startProxyHarness({ engine: { policy: () => ({ content }), tokensPerChunk: 1, chunkDelayMs: 2 } });
    const { rolloutId, baseUrl } = await h.claim();
    // The proxy is in this process: its parses of the engine's events are JSON.parse calls on them.
    const parse = vi.spyOn(JSON, "parse");
    const eventsRead = () =>
      parse.mock.calls.filter(([text]) => typeof text === "string" && text.includes('"chat.completion.chunk"')).length;
    try {
      const res = await postJson(`${baseUrl}/chat/completions`, {
        model: "fake-model",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (parseSse(text).length < 120) text += decoder.decode((await reader.read()).value, { stream: true });
      // Each event came in a read of its own; the proxy reads them 32 at a time once they wait. Left to the end of
      // the stream, none would have been read by now.
      const midway = eventsRead();
      for (let next = await reader.read(); !next.done; next = await reader.read()) text += decoder.decode(next.value, { stream: true });
      expect(midway).toBeGreaterThanOrEqual(64);
      const events = parseSse(text);
      expect(events.length).toBeGreaterThan(content.length);
      expect(events.at(-1)).toBe("[DONE]");
      expect(eventsRead()).toBe(events.length - 1);
    } finally {
      parse.mockRestore();
    }
    const [span] = await spansOf(rolloutId);
    expect(attrInts(span!.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(h.engine.answers[0]?.responseIds);
    expect(attrDoubles(span!.attributes, sc.AGL_LLM_LOGPROBS)).toEqual(h.engine.answers[0]?.logprobs);
    expect(recordedAnswer(span!.attributes).choices[0]?.message.content).toBe(content);
  });

  it("sends a stream's headers at once, even when the engine is slow to send its first event", async () => {
    const engine = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      setTimeout(() => res.end('data: {"choices":[{"index":0,"delta":{"content":"late"}}]}\n\ndata: [DONE]\n\n'), 500);
    });
    await new Promise<void>((resolve) => engine.listen(0, "127.0.0.1", resolve));
    try {
      const port = (engine.address() as AddressInfo).port;
      h = await startProxyHarness({ proxy: { backends: [{ endpoint: `http://127.0.0.1:${port}/v1`, model: "slow" }] } });
      const { baseUrl } = await h.claim();
      const started = Date.now();
      const res = await postJson(`${baseUrl}/chat/completions`, {
        model: "slow",
        messages: [{ role: "user", content: "x" }],
        stream: true,
      });
      expect(Date.now() - started).toBeLessThan(400);
      expect(parseSse(await res.text())).toEqual(['{"choices":[{"index":0,"delta":{"content":"late"}}]}', "[DONE]"]);
    } finally {
      engine.close();
    }
  });

  it("answers a stream the engine sent at once in one write to the client, its end included", async () => {
    const events = ['{"choices":[{"index":0,"delta":{"content":"all"}}]}', '{"choices":[{"index":0,"delta":{"content":" at once"}}]}'];
    const engine = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`${events.map((e) => `data: ${e}\n\n`).join("")}data: [DONE]\n\n`);
    });
    await new Promise<void>((resolve) => engine.listen(0, "127.0.0.1", resolve));
    // Writes to sockets of this process by their peer's port (the proxy runs here): one writev or write each.
    const writes = new Map<number | undefined, number>();
    const proto = net.Socket.prototype as unknown as Record<"_write" | "_writev", (this: net.Socket, ...args: unknown[]) => void>;
    const { _write, _writev } = proto;
    const counted = (write: typeof _write) =>
      function (this: net.Socket, ...args: unknown[]) {
        writes.set(this.remotePort, (writes.get(this.remotePort) ?? 0) + 1);
        return write.apply(this, args);
      };
    proto._write = counted(_write);
    proto._writev = counted(_writev);
    try {
      const port = (engine.address() as AddressInfo).port;
      h = await startProxyHarness({ proxy: { backends: [{ endpoint: `http://127.0.0.1:${port}/v1`, model: "m" }] } });
      const { rolloutId, baseUrl } = await h.claim();
      const url = new URL(`${baseUrl}/chat/completions`);
      const { text, clientPort } = await new Promise<{ text: string; clientPort: number }>((resolve, reject) => {
        const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" }, agent: false }, (res) => {
          const clientPort = req.socket?.localPort as number;
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => resolve({ text: body, clientPort }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], stream: true }));
      });
      expect(parseSse(text)).toEqual([...events, "[DONE]"]);
      // The proxy's answer on the client's connection.
      expect(writes.get(clientPort)).toBe(1);
      expect((await spansOf(rolloutId)).length).toBe(1);
    } finally {
      proto._write = _write;
      proto._writev = _writev;
      engine.close();
    }
  });

  it("keeps multi-byte text intact across chunk boundaries", async () => {
    h = await startProxyHarness({ engine: { ...toolPolicy, tokensPerChunk: 1 } });
    const { rolloutId, baseUrl } = await h.claim();
    const res = await postJson(`${baseUrl}/chat/completions`, {
      model: "fake-model",
      messages: [{ role: "user", content: "é" }],
      stream: true,
    });
    const chunks = parseSse(await res.text())
      .slice(0, -1)
      .map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.choices[0].delta.content ?? "").join("")).toBe("Sunny, 24°C — enjoy! 🌞");
    const [span] = await spansOf(rolloutId);
    expect(recordedAnswer(span!.attributes).choices[0]?.message.content).toBe("Sunny, 24°C — enjoy! 🌞");
  });

  it("serves completions, streamed and not, from text and from token ids", async () => {
    h = await startProxyHarness();
    const { rolloutId, baseUrl } = await h.claim();
    const plain = await postJson(`${baseUrl}/completions`, { model: "fake-model", prompt: "Once" });
    expect(plain.status).toBe(200);
    const streamed = await postJson(`${baseUrl}/completions`, { model: "fake-model", prompt: encode("Once"), stream: true });
    expect(parseSse(await streamed.text()).at(-1)).toBe("[DONE]");
    expect(h.engine.requests[0]?.body.logprobs).toBe(0);
    const spans = await spansOf(rolloutId);
    expect(spans).toHaveLength(2);
    spans.forEach((span, i) => {
      expect(span.name).toBe("text_completion fake-model");
      expect(attrInts(span.attributes, sc.AGL_LLM_PROMPT_TOKEN_IDS)).toEqual(encode("Once"));
      expect(attrInts(span.attributes, sc.AGL_LLM_RESPONSE_TOKEN_IDS)).toEqual(h.engine.answers[i]?.responseIds);
      expect(attrDoubles(span.attributes, sc.AGL_LLM_LOGPROBS)).toEqual(h.engine.answers[i]?.logprobs);
    });
  });

  it("joins the caller's trace from traceparent", async () => {
    h = await startProxyHarness();
    const { rolloutId, baseUrl } = await h.claim();
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    await postJson(`${baseUrl}/chat/completions`, { model: "fake-model", messages: [{ role: "user", content: "x" }] }, { traceparent });
    const [span] = await spansOf(rolloutId);
    expect([span?.traceId, span?.parentId]).toEqual(["0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"]);
  });

  it("serves calls without scope and counts them, storing nothing", async () => {
    h = await startProxyHarness();
    const res = await postJson(`${h.url}/v1/chat/completions`, { model: "fake-model", messages: [{ role: "user", content: "x" }] });
    expect(res.status).toBe(200);
    const streamed = await postJson(`${h.url}/v1/chat/completions`, {
      model: "fake-model",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    const events = parseSse(await streamed.text());
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.slice(0, -1).flatMap((e) => JSON.parse(e).choices[0]?.token_ids ?? [])).toEqual(h.engine.answers[1]?.responseIds);
    expect(h.proxy.status().unattributedCalls).toBe(2);
    expect((await h.store.getStatistics({})).totalSpans).toBe(0);
    const models = await (await fetch(`${h.url}/v1/models`)).json();
    expect(models.data.map((m: { id: string }) => m.id)).toEqual(["fake-model"]);
  });

  it("follows the store's latest LLM resource and records which version served each call", async () => {
    h = await startProxyHarness({ viaResources: true });
    const { rolloutId, baseUrl } = await h.claim();
    await postJson(`${baseUrl}/chat/completions`, { model: "fake-model", messages: [{ role: "user", content: "x" }] });
    const latest = (await h.store.getLatestResources({})).resources!;
    await h.store.updateResources({ resourcesId: latest.resourcesId, resources: latest.resources });
    await expect.poll(() => h.proxy.status().resourcesVersion).toBe(2);
    await postJson(`${baseUrl}/chat/completions`, { model: "fake-model", messages: [{ role: "user", content: "y" }] });
    const spans = await spansOf(rolloutId);
    expect(
      spans.map((s) => [attrString(s.attributes, sc.AGL_LLM_RESOURCES_ID), attrNumber(s.attributes, sc.AGL_LLM_RESOURCES_VERSION)]),
    ).toEqual([
      [latest.resourcesId, 1],
      [latest.resourcesId, 2],
    ]);
  });
});
