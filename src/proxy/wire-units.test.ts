/** Small pieces of the proxy: SSE splitting, answer assembly, routes and attempt URLs. */
import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ResourceSchema } from "../gen/agl/v1/types_pb.js";
import { upstreamUrl } from "./backends.js";
import { bindResource, proxyBaseUrl } from "./binding.js";
import { createBoundedMap } from "./bounded-map.js";
import { parseToolCalls } from "./completion-to-chat.js";
import { createStreamAssembler, readCompletion } from "./completion-reader.js";
import { routeRequest } from "./proxy-routes.js";
import { createSseSplitter } from "./sse-splitter.js";

describe("SSE splitter", () => {
  it("cuts events at any separator even when bytes, separators and UTF-8 sequences straddle chunks", () => {
    const text =
      'data: {"a":"é😀"}\r\n\r\ndata: x\ndata: y\n\nevent: e\rdata: z\r\r\r\n\r\n: comment\n\ndata:tight\n\ndata: cr\r\n\n' +
      "data: two\rdata: lines\r\rdata: [DONE]\n\n";
    const bytes = Buffer.from(text);
    for (const size of [1, 2, 3, 7, bytes.length]) {
      const splitter = createSseSplitter();
      const events = [];
      for (let i = 0; i < bytes.length; i += size) events.push(...splitter.push(bytes.subarray(i, i + size)));
      expect(events.map((e) => e.data)).toEqual(['{"a":"é😀"}', "x\ny", "z", "", "", "tight", "cr", "two\nlines", "[DONE]"]);
      expect(events.map((e) => e.raw).join("")).toBe(text);
      expect(splitter.end()).toBeUndefined();
    }
  });

  it("cuts a stream of LF line ends alone the same way, its events and blank lines straddling chunks", () => {
    const text = 'data: {"a":"é😀"}\n\n\ndata: x\ndata: y\n\n: comment\n\nevent: e\ndata:z\n\n\n\ndata: [DONE]\n\n';
    const bytes = Buffer.from(text);
    for (const size of [1, 2, 3, 7, bytes.length]) {
      const splitter = createSseSplitter();
      const events = [];
      for (let i = 0; i < bytes.length; i += size) events.push(...splitter.push(bytes.subarray(i, i + size)));
      expect(events.map((e) => e.data)).toEqual(['{"a":"é😀"}', "x\ny", "", "z", "", "[DONE]"]);
      expect(events.map((e) => e.raw).join("")).toBe(text);
      expect(splitter.end()).toBeUndefined();
    }
  });

  it("reads an event left without its blank line at the end of the stream", () => {
    const splitter = createSseSplitter();
    expect(splitter.push(Buffer.from("data: a\n\ndata: b"))).toEqual([{ raw: "data: a\n\n", data: "a" }]);
    expect(splitter.end()).toEqual({ raw: "data: b", data: "b" });
  });
});

describe("answer assembly", () => {
  it("reads ids and logprobs of chat and completions answers, older vLLM's response_token_ids too", () => {
    expect(
      readCompletion({
        id: "c",
        prompt_token_ids: [1],
        choices: [{ index: 0, token_ids: [2, 3], logprobs: { content: [{ logprob: -1 }, { logprob: -2 }] } }],
      }),
    ).toMatchObject({
      promptIds: [1],
      responseIds: [2, 3],
      logprobs: [-1, -2],
      responseId: "c",
    });
    expect(readCompletion({ choices: [{ prompt_token_ids: [5], token_ids: [6], logprobs: { token_logprobs: [-0.5] } }] })).toMatchObject({
      promptIds: [5],
      responseIds: [6],
      logprobs: [-0.5],
    });
    expect(readCompletion({ prompt_token_ids: [1], response_token_ids: [[7, 8]], choices: [{}] }).responseIds).toEqual([7, 8]);
    const stripped = readCompletion({
      prompt_token_ids: [1],
      choices: [{ token_ids: [2], logprobs: { content: [] }, message: { content: "hi" } }],
    }).body;
    expect(stripped).toEqual({ choices: [{ message: { content: "hi" } }] });
  });

  it("assembles streamed chunks per choice, tool call arguments included", () => {
    const a = createStreamAssembler("chat");
    a.add({ id: "x", model: "m", prompt_token_ids: [1, 2], choices: [{ index: 0, delta: { role: "assistant", content: "" } }] });
    a.add({ choices: [{ index: 0, delta: { content: "Hi" }, token_ids: [3], logprobs: { content: [{ logprob: -0.1 }] } }] });
    a.add({
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, id: "t", type: "function", function: { name: "f", arguments: "" } }] },
          token_ids: [4],
        },
      ],
    });
    a.add({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }, token_ids: [5] }] });
    a.add({
      choices: [
        { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "1}" } }] }, token_ids: [6], finish_reason: "tool_calls" },
      ],
    });
    const r = a.result();
    expect(r).toMatchObject({
      promptIds: [1, 2],
      responseIds: [3, 4, 5, 6],
      responseId: "x",
      finishReasons: ["tool_calls"],
      inputTokens: 2,
      outputTokens: 4,
    });
    expect(r.body.choices).toEqual([
      {
        index: 0,
        message: {
          role: "assistant",
          content: "Hi",
          tool_calls: [{ id: "t", type: "function", function: { name: "f", arguments: '{"a":1}' } }],
        },
        finish_reason: "tool_calls",
      },
    ]);
    // Logprobs came for one chunk only: they cannot line up with the ids, and the adapters will drop them.
    expect(r.logprobs).toEqual([-0.1]);
  });
});

describe("routes and binding", () => {
  it("routes OpenAI paths with and without /v1 and the attempt prefix", () => {
    expect(routeRequest("POST", "/rollout/ro-1/attempt/at-2/v1/chat/completions?x=1")).toEqual({
      kind: "call",
      call: "chat",
      scope: { rolloutId: "ro-1", attemptId: "at-2" },
    });
    expect(routeRequest("POST", "/completions")).toEqual({ kind: "call", call: "completions", scope: undefined });
    expect(routeRequest("GET", "/rollout/ro-1/attempt/at-2/models")).toEqual({
      kind: "models",
      scope: { rolloutId: "ro-1", attemptId: "at-2" },
    });
    expect(routeRequest("GET", "/v1/chat/completions")).toEqual({ kind: "method_not_allowed", allow: "POST" });
    expect(routeRequest("POST", "/v1/embeddings")).toBeUndefined();
  });

  it("binds a proxy_llm resource to an attempt's URL and leaves other resources alone", () => {
    expect(proxyBaseUrl("http://h:1/v1/", "ro-1", "at-2")).toBe("http://h:1/rollout/ro-1/attempt/at-2/v1");
    expect(proxyBaseUrl("http://h:1", "ro-1", "at-2")).toBe("http://h:1/rollout/ro-1/attempt/at-2/v1");
    const proxy = create(ResourceSchema, { kind: { case: "proxyLlm", value: { endpoint: "http://h:1/v1", model: "m", apiKey: "k" } } });
    const bound = bindResource(proxy, "ro-1", "at-2");
    expect(bound.kind).toMatchObject({
      case: "llm",
      value: { endpoint: "http://h:1/rollout/ro-1/attempt/at-2/v1", model: "m", apiKey: "k" },
    });
    const json = create(ResourceSchema, { kind: { case: "json", value: { kind: { case: "stringValue", value: "x" } } } });
    expect(bindResource(json, "ro-1", "at-2")).toBe(json);
    expect(() => proxyBaseUrl("http://h", "", "at")).toThrow();
  });

  it("joins an engine's base URL and an API path, one URL object for each place", () => {
    const chat = upstreamUrl("http://u:p@h:1/v1//", "/chat/completions");
    expect(chat.href).toBe("http://u:p@h:1/v1/chat/completions");
    expect(upstreamUrl("http://u:p@h:1/v1//", "/chat/completions")).toBe(chat);
    expect(upstreamUrl("http://u:p@h:1/v1//", "/completions").href).toBe("http://u:p@h:1/v1/completions");
    expect(upstreamUrl("http://h:1/v1", "/chat/completions").href).toBe("http://h:1/v1/chat/completions");
    expect(() => upstreamUrl("not a url", "/chat/completions")).toThrow(TypeError);
  });
});

describe("the translators' small parts", () => {
  it("routes the Responses and Messages paths, plain and attempt-scoped", () => {
    expect(routeRequest("POST", "/v1/responses")).toEqual({ kind: "call", call: "responses", scope: undefined });
    expect(routeRequest("POST", "/rollout/r/attempt/a/v1/messages")).toEqual({
      kind: "call",
      call: "messages",
      scope: { rolloutId: "r", attemptId: "a" },
    });
    expect(routeRequest("GET", "/v1/messages")).toEqual({ kind: "method_not_allowed", allow: "POST" });
    expect(routeRequest("POST", "/v1/messages/count_tokens")).toEqual({ kind: "count_tokens", scope: undefined });
  });

  it("splits Hermes tool calls off generated text, keeping malformed ones as content", () => {
    const text = 'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2}}\n</tool_call>';
    const { content, calls } = parseToolCalls(text);
    expect(content).toBe("Let me add.");
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([["add", '{"a":2}']]);
    expect(parseToolCalls("<tool_call>\nnot json\n</tool_call>")).toEqual({ content: "<tool_call>\nnot json\n</tool_call>", calls: [] });
  });

  it("a bounded map forgets its oldest entries past its count or its weight", () => {
    const map = createBoundedMap<number>(2, 10);
    map.set("a", 1, 4);
    map.set("b", 2, 4);
    map.set("c", 3, 4);
    expect([map.get("a"), map.get("b"), map.get("c"), map.size]).toEqual([undefined, 2, 3, 2]);
    map.set("d", 4, 9);
    expect([map.get("b"), map.get("c"), map.get("d")]).toEqual([undefined, undefined, 4]);
    map.set("huge", 5, 11);
    expect(map.get("huge")).toBeUndefined();
  });
});
