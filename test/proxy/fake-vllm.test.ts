/** The loopback engine itself: the wire format the proxy and the adapters are tested against. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decode, encode, IM_END, renderChat } from "../support/fake-tokenizer.js";
import { type FakeVllm, startFakeVllm } from "../support/fake-vllm.js";
import { readSse } from "../support/sse.js";

let engine: FakeVllm;
beforeEach(async () => {
  engine = await startFakeVllm({
    policy: (input) =>
      input.tools.length > 0 && input.messages.at(-1)?.role === "user"
        ? { content: "Let me add.", toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] }
        : { content: "Five." },
  });
});
afterEach(() => engine.close());

const post = (path: string, body: unknown) =>
  fetch(`${engine.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

const messages = [{ role: "user", content: "2+3?" }];
const tools = [{ type: "function", function: { name: "add", parameters: { type: "object" } } }];

describe("fake vLLM", () => {
  it("returns prompt ids, token ids and logprobs when asked, and nothing extra otherwise", async () => {
    const plain = await (await post("/chat/completions", { model: "fake-model", messages })).json();
    expect(plain.prompt_token_ids).toBeUndefined();
    expect(plain.choices[0].token_ids).toBeUndefined();
    expect(plain.choices[0].message.content).toBe("Five.");

    const full = await (await post("/chat/completions", { model: "fake-model", messages, return_token_ids: true, logprobs: true })).json();
    expect(full.prompt_token_ids).toEqual(renderChat(messages));
    expect(decode(full.prompt_token_ids)).toBe("<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n");
    expect(full.choices[0].token_ids).toEqual([...encode("Five."), IM_END]);
    expect(full.choices[0].logprobs.content).toHaveLength(full.choices[0].token_ids.length);
    expect(engine.answers[1]?.responseIds).toEqual(full.choices[0].token_ids);
  });

  it("generates tool calls whose re-rendered history continues the prompt exactly", async () => {
    const first = await (await post("/chat/completions", { model: "fake-model", messages, tools, return_token_ids: true })).json();
    const message = first.choices[0].message;
    expect(first.choices[0].finish_reason).toBe("tool_calls");
    expect(message.tool_calls[0].function).toEqual({ name: "add", arguments: '{"a":2,"b":3}' });
    const history = [...messages, message, { role: "tool", tool_call_id: message.tool_calls[0].id, content: "5" }];
    const second = await (
      await post("/chat/completions", { model: "fake-model", messages: history, tools, return_token_ids: true })
    ).json();
    const context = [...first.prompt_token_ids, ...first.choices[0].token_ids];
    expect(second.prompt_token_ids.slice(0, context.length)).toEqual(context);
  });

  it("streams ids chunk by chunk that add up to the non-streamed answer, tool calls included", async () => {
    const res = await post("/chat/completions", {
      model: "fake-model",
      messages,
      tools,
      return_token_ids: true,
      logprobs: true,
      stream: true,
    });
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].prompt_token_ids).toEqual(renderChat(messages, tools));
    const ids = chunks.flatMap((c) => c.choices[0]?.token_ids ?? []);
    expect(ids).toEqual(engine.answers[0]?.responseIds);
    const args = chunks
      .flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .map((t) => t.function.arguments)
      .join("");
    expect(args).toBe('{"a":2,"b":3}');
    expect(chunks.length).toBeGreaterThan(5);
  });

  it("serves completions from text or from token ids", async () => {
    const text = await (await post("/completions", { model: "fake-model", prompt: "hi", return_token_ids: true, logprobs: 0 })).json();
    expect(text.choices[0].prompt_token_ids).toEqual(encode("hi"));
    expect(text.choices[0].logprobs.token_logprobs).toHaveLength(text.choices[0].token_ids.length);
    const ids = await (await post("/completions", { model: "fake-model", prompt: encode("hi"), return_token_ids: true })).json();
    expect(ids.choices[0].prompt_token_ids).toEqual(encode("hi"));
  });

  it("applies queued faults in order", async () => {
    engine.fault({ type: "status", status: 429, retryAfter: "1" }, { type: "status", status: 503 });
    const a = await post("/chat/completions", { model: "fake-model", messages });
    expect([a.status, a.headers.get("retry-after")]).toEqual([429, "1"]);
    expect((await post("/chat/completions", { model: "fake-model", messages })).status).toBe(503);
    expect((await post("/chat/completions", { model: "fake-model", messages })).status).toBe(200);
    engine.fault({ type: "close" });
    await expect(post("/chat/completions", { model: "fake-model", messages })).rejects.toThrow();
    engine.setOptions({ supportsTokenIds: false });
    expect((await post("/chat/completions", { model: "fake-model", messages, return_token_ids: true })).status).toBe(400);
  });
});
