/**
 * A loopback stand-in for vLLM's OpenAI-compatible server (≥ 0.10.2 wire format): `/v1/chat/completions`,
 * `/v1/completions` (text or token-id prompts; a token-id prompt in the chat template is read back into messages, so
 * the policy answers it as it would the chat call, tool calls as Hermes text), `/tokenize` (messages through the chat
 * template, or a text prompt) and `/v1/models`; `return_token_ids` adds `prompt_token_ids` (chat: top
 * level; completions: per choice; streams: first chunk) and per-choice `token_ids` (streams: the new ids of each
 * chunk); `logprobs` adds chosen-token logprobs; streams are real SSE with several tokens per chunk; tool calls are
 * generated Hermes-style and parsed into `tool_calls`. Faults can be queued: an HTTP status, a stall, a dropped
 * connection, a stream broken midway. Everything it answered is kept in `answers` so tests can compare ids exactly.
 */
import * as http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import {
  assistantParts,
  type ChatMessage,
  decode,
  encode,
  fakeLogprob,
  IM_END,
  parseChat,
  renderChat,
  type ToolCallText,
} from "./fake-tokenizer.js";
import type { WireJson } from "./wire-json.js";

/** What the policy sees of a request. */
export interface PolicyInput {
  kind: "chat" | "completions";
  messages: ChatMessage[];
  promptIds: number[];
  promptText: string;
  tools: unknown[];
  request: WireJson;
  /** 0-based index of this answer among all answers of the engine. */
  index: number;
}

/** What the "model" says. */
export interface Reply {
  content?: string;
  toolCalls?: ToolCallText[];
}

/** A fault applied to the next request. */
export type Fault =
  | { type: "status"; status: number; retryAfter?: string; body?: string }
  | { type: "stall"; ms: number }
  | { type: "close" }
  | { type: "break"; afterChunks: number }
  /** vLLM's way to fail mid-generation: an `error` event, then `[DONE]`. */
  | { type: "error-event"; afterChunks: number; message: string };

/** One answer the engine sent, as the tests compare it. */
export interface Answer {
  responseId: string;
  kind: "chat" | "completions";
  stream: boolean;
  promptIds: number[];
  responseIds: number[];
  logprobs: number[];
  toolCalls: ToolCallText[];
  /** Sampled unmerged (see `reencodeShare`): its text encodes to other ids. */
  reencoded: boolean;
}

export interface FakeVllmOptions {
  model?: string;
  policy?: (input: PolicyInput) => Reply;
  /** Tokens per streamed chunk (default 3). */
  tokensPerChunk?: number;
  /** Delay between streamed chunks (default 0). */
  chunkDelayMs?: number;
  /** Delay before answering (default 0). */
  latencyMs?: number;
  /** false: reject `return_token_ids` with 400 like engines that do not know it (default true). */
  supportsTokenIds?: boolean;
  /** The tokenizer merges a space with the letter or digit after it (see `encode`); default false. */
  merges?: boolean;
  /**
   * With `merges`: the share of answers (0–1, chosen by a hash of the answer's index) the model samples unmerged,
   * as BPE models do now and then; rendering such an answer again encodes it differently. Default 0.
   */
  reencodeShare?: number;
  /** false: no `/tokenize` route (404), like engines other than vLLM (default true). */
  tokenize?: boolean;
}

export interface FakeVllm {
  /** OpenAI base URL: `http://127.0.0.1:PORT/v1`. */
  readonly url: string;
  readonly model: string;
  /** Every request received (bodies parsed), faulted ones included. */
  readonly requests: { path: string; body: WireJson; headers: http.IncomingHttpHeaders }[];
  readonly answers: Answer[];
  fault(...faults: Fault[]): void;
  setOptions(options: Partial<FakeVllmOptions>): void;
  close(): Promise<void>;
}

const defaultPolicy = (input: PolicyInput): Reply => ({ content: `Answer ${input.index}: ${input.promptText.length} chars seen.` });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function startFakeVllm(initial: FakeVllmOptions = {}): Promise<FakeVllm> {
  const options: FakeVllmOptions = { ...initial };
  const model = options.model ?? "fake-model";
  const faults: Fault[] = [];
  const requests: FakeVllm["requests"] = [];
  const answers: Answer[] = [];
  const sockets = new Set<Socket>();
  let counter = 0;

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = (req.url ?? "/").split("?")[0] as string;
    if (req.method === "GET" && (path === "/v1/models" || path === "/models")) {
      return json(res, 200, { object: "list", data: [{ id: model, object: "model", owned_by: "fake" }] });
    }
    if (req.method === "POST" && (path === "/tokenize" || path === "/v1/tokenize")) {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as WireJson;
      requests.push({ path, body, headers: req.headers });
      if (options.tokenize === false) return json(res, 404, { detail: "Not Found" });
      const tokens = Array.isArray(body.messages)
        ? renderChat(body.messages, body.tools ?? [], { merges: options.merges, addGenerationPrompt: body.add_generation_prompt !== false })
        : encode(String(body.prompt ?? ""), options.merges);
      return json(res, 200, { count: tokens.length, max_model_len: 32_768, tokens, token_strs: null });
    }
    const kind: "chat" | "completions" | undefined = path.endsWith("/chat/completions")
      ? "chat"
      : path.endsWith("/completions")
        ? "completions"
        : undefined;
    if (!kind || req.method !== "POST") return json(res, 404, { error: { message: "not found" } });
    let body: WireJson;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return json(res, 400, { error: { message: "bad json", type: "BadRequestError" } });
    }
    requests.push({ path, body, headers: req.headers });
    const fault = faults.shift();
    if (fault?.type === "close") return void req.socket.destroy();
    if (fault?.type === "stall") await sleep(fault.ms);
    if (fault?.type === "status") {
      const headers: http.OutgoingHttpHeaders = { "content-type": "application/json" };
      if (fault.retryAfter) headers["retry-after"] = fault.retryAfter;
      res.writeHead(fault.status, headers);
      return void res.end(fault.body ?? JSON.stringify({ error: { message: `injected ${fault.status}` } }));
    }
    if (body.return_token_ids !== undefined && options.supportsTokenIds === false) {
      return json(res, 400, {
        error: { message: "Unrecognized request argument supplied: return_token_ids", type: "invalid_request_error" },
      });
    }
    if (body.model !== model)
      return json(res, 404, { error: { message: `The model \`${body.model}\` does not exist.`, type: "NotFoundError" } });
    if (options.latencyMs) await sleep(options.latencyMs);
    const index = counter++;
    let messages: ChatMessage[] = kind === "chat" ? body.messages : [];
    let tools: unknown[] = body.tools ?? [];
    let promptIds: number[];
    // A token-id prompt rendered by the chat template is answered as the chat call it stands for (tool calls as text).
    let chatPrompt = kind === "chat";
    if (kind === "chat") promptIds = renderChat(messages, tools, { merges: options.merges });
    else if (Array.isArray(body.prompt) && body.prompt.every((x: unknown) => Number.isInteger(x))) {
      promptIds = body.prompt;
      const parsed = parseChat(promptIds);
      if (parsed.generating) ({ messages, tools, generating: chatPrompt } = parsed);
    } else promptIds = encode(String(body.prompt), options.merges);
    const reply = (options.policy ?? defaultPolicy)({
      kind,
      messages,
      promptIds,
      promptText: decode(promptIds),
      tools,
      request: body,
      index,
    });
    const toolCalls = chatPrompt ? (reply.toolCalls ?? []) : [];
    // A stop string cuts the content where it starts; the answer then ends without its end-of-turn token.
    const stops: string[] = typeof body.stop === "string" ? [body.stop] : Array.isArray(body.stop) ? body.stop : [];
    let content = reply.content ?? "";
    const stopHit = toolCalls.length === 0 ? stops.find((st) => content.includes(st)) : undefined;
    if (stopHit !== undefined) content = content.slice(0, content.indexOf(stopHit));
    const parts = assistantParts(content, toolCalls);
    const reencoded = options.merges === true && ((index * 2_654_435_761) >>> 0) % 1000 < (options.reencodeShare ?? 0) * 1000;
    const partIds = parts.map((p) => encode(p.text, options.merges && !reencoded));
    const ids = partIds.flat();
    let finish = toolCalls.length > 0 ? "tool_calls" : "stop";
    let responseIds = stopHit === undefined ? [...ids, IM_END] : ids;
    const maxTokens = body.max_tokens ?? body.max_completion_tokens;
    if (toolCalls.length === 0 && typeof maxTokens === "number" && maxTokens < responseIds.length) {
      responseIds = responseIds.slice(0, maxTokens);
      finish = "length";
    }
    const logprobs = responseIds.map((id, i) => fakeLogprob(id, i));
    const responseId = `${kind === "chat" ? "chatcmpl" : "cmpl"}-fake-${index}`;
    const answer: Answer = { responseId, kind, stream: body.stream === true, promptIds, responseIds, logprobs, toolCalls, reencoded };
    const ctx: Ctx = {
      body,
      kind,
      model,
      responseId,
      parts,
      partIds,
      toolCalls,
      finish,
      stopHit,
      responseIds,
      logprobs,
      promptIds,
      options,
    };
    if (body.stream === true) {
      const completed = await stream(res, ctx, fault?.type === "break" || fault?.type === "error-event" ? fault : undefined);
      if (completed) answers.push(answer);
    } else {
      json(res, 200, whole(ctx));
      answers.push(answer);
    }
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    model,
    requests,
    answers,
    fault: (...f) => faults.push(...f),
    setOptions: (o) => Object.assign(options, o),
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

interface Ctx {
  body: WireJson;
  kind: "chat" | "completions";
  model: string;
  responseId: string;
  parts: ReturnType<typeof assistantParts>;
  /** The sampled ids of each part. */
  partIds: number[][];
  toolCalls: ToolCallText[];
  finish: string;
  /** The stop string that ended the answer (vLLM's `stop_reason`). */
  stopHit: string | undefined;
  responseIds: number[];
  logprobs: number[];
  promptIds: number[];
  options: FakeVllmOptions;
}

function json(res: http.ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

const toolCallId = (ctx: Ctx, i: number) => `call_${ctx.responseId}_${i}`;

function chatLogprobs(ids: number[], lps: number[]) {
  return {
    content: ids.map((id, i) => ({ token: decode([id]), logprob: lps[i], bytes: [...Buffer.from(decode([id]))], top_logprobs: [] })),
  };
}

function completionLogprobs(ids: number[], lps: number[]) {
  return {
    tokens: ids.map((id) => decode([id])),
    token_logprobs: lps,
    top_logprobs: ids.map(() => ({})),
    text_offset: ids.map((_, i) => i),
  };
}

function whole(ctx: Ctx) {
  const wantIds = ctx.body.return_token_ids === true;
  const wantLp = ctx.kind === "chat" ? ctx.body.logprobs === true : typeof ctx.body.logprobs === "number";
  const text = ctx.parts
    .filter((p) => p.kind === "content")
    .map((p) => p.text)
    .join("");
  // Completions show what was generated, tool calls included; chat shows the content beside parsed tool calls.
  const generated = decode(ctx.responseIds.filter((id) => id !== IM_END));
  const shownText = ctx.kind === "chat" && ctx.toolCalls.length > 0 ? text : generated;
  const usage = {
    prompt_tokens: ctx.promptIds.length,
    completion_tokens: ctx.responseIds.length,
    total_tokens: ctx.promptIds.length + ctx.responseIds.length,
  };
  if (ctx.kind === "completions") {
    return {
      id: ctx.responseId,
      object: "text_completion",
      created: 1_700_000_000,
      model: ctx.model,
      choices: [
        {
          index: 0,
          text: shownText,
          finish_reason: ctx.finish,
          stop_reason: ctx.stopHit ?? null,
          ...(wantLp ? { logprobs: completionLogprobs(ctx.responseIds, ctx.logprobs) } : { logprobs: null }),
          ...(wantIds ? { token_ids: ctx.responseIds, prompt_token_ids: ctx.promptIds } : {}),
        },
      ],
      usage,
    };
  }
  const message: Record<string, unknown> = { role: "assistant", content: ctx.toolCalls.length > 0 && !text ? null : shownText };
  if (ctx.toolCalls.length > 0) {
    message.tool_calls = ctx.toolCalls.map((tc, i) => ({
      id: toolCallId(ctx, i),
      type: "function",
      function: { name: tc.name, arguments: JSON.stringify(tc.arguments) },
    }));
  }
  return {
    id: ctx.responseId,
    object: "chat.completion",
    created: 1_700_000_000,
    model: ctx.model,
    ...(wantIds ? { prompt_token_ids: ctx.promptIds } : {}),
    choices: [
      {
        index: 0,
        message,
        finish_reason: ctx.finish,
        stop_reason: ctx.stopHit ?? null,
        ...(wantLp ? { logprobs: chatLogprobs(ctx.responseIds, ctx.logprobs) } : { logprobs: null }),
        ...(wantIds ? { token_ids: ctx.responseIds } : {}),
      },
    ],
    usage,
  };
}

/** Streams the answer; resolves false when a `break` fault cut it. */
async function stream(res: http.ServerResponse, ctx: Ctx, fault: Extract<Fault, { afterChunks: number }> | undefined): Promise<boolean> {
  const wantIds = ctx.body.return_token_ids === true;
  const wantLp = ctx.kind === "chat" ? ctx.body.logprobs === true : typeof ctx.body.logprobs === "number";
  const per = ctx.options.tokensPerChunk ?? 3;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const base = {
    id: ctx.responseId,
    object: ctx.kind === "chat" ? "chat.completion.chunk" : "text_completion",
    created: 1_700_000_000,
    model: ctx.model,
  };
  let sent = 0;
  const send = async (chunk: object) => {
    if (fault && sent >= fault.afterChunks) throw fault;
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
    sent++;
    if (ctx.options.chunkDelayMs) await sleep(ctx.options.chunkDelayMs);
  };
  // Token pieces, each tagged with what its text means to a streaming parser.
  const pieces: { ids: number[]; kind: string; call?: number; first: boolean }[] = [];
  let taken = 0;
  for (const [n, part] of ctx.parts.entries()) {
    const ids = (ctx.partIds[n] as number[]).slice(0, Math.max(0, ctx.responseIds.length - taken));
    for (let i = 0; i < ids.length; i += per) pieces.push({ ids: ids.slice(i, i + per), kind: part.kind, call: part.call, first: i === 0 });
    taken += ids.length;
  }
  if (taken < ctx.responseIds.length) pieces.push({ ids: ctx.responseIds.slice(taken), kind: "eos", first: true });
  try {
    if (ctx.kind === "chat") {
      await send({
        ...base,
        ...(wantIds ? { prompt_token_ids: ctx.promptIds } : {}),
        choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
      });
    }
    let offset = 0;
    for (const [n, piece] of pieces.entries()) {
      const last = n === pieces.length - 1;
      const lps = ctx.logprobs.slice(offset, offset + piece.ids.length);
      const text = piece.kind === "eos" ? "" : decode(piece.ids);
      const choice: Record<string, unknown> = { index: 0, finish_reason: last ? ctx.finish : null };
      if (last) choice.stop_reason = ctx.stopHit ?? null;
      if (wantIds) choice.token_ids = piece.ids;
      if (ctx.kind === "completions") {
        choice.text = text;
        choice.logprobs = wantLp ? completionLogprobs(piece.ids, lps) : null;
        if (wantIds && offset === 0) choice.prompt_token_ids = ctx.promptIds;
      } else {
        choice.logprobs = wantLp ? chatLogprobs(piece.ids, lps) : null;
        if (piece.kind === "content") choice.delta = { content: text };
        else if (piece.kind === "header" && piece.first) {
          const i = piece.call as number;
          choice.delta = {
            tool_calls: [{ index: i, id: toolCallId(ctx, i), type: "function", function: { name: ctx.toolCalls[i]?.name, arguments: "" } }],
          };
        } else if (piece.kind === "args") choice.delta = { tool_calls: [{ index: piece.call, function: { arguments: text } }] };
        else choice.delta = {};
      }
      await send({ ...base, choices: [choice] });
      offset += piece.ids.length;
    }
    if (ctx.body.stream_options?.include_usage) {
      await send({
        ...base,
        choices: [],
        usage: {
          prompt_tokens: ctx.promptIds.length,
          completion_tokens: ctx.responseIds.length,
          total_tokens: ctx.promptIds.length + ctx.responseIds.length,
        },
      });
    }
    res.end("data: [DONE]\n\n");
    return true;
  } catch (error) {
    if (error === fault && fault?.type === "error-event") {
      const event = { error: { object: "error", message: fault.message, type: "InternalServerError", code: 500 } };
      res.end(`data: ${JSON.stringify(event)}\n\ndata: [DONE]\n\n`);
      return false;
    }
    // Let what was written reach the client, so the break happens mid-stream rather than before the answer.
    await new Promise<void>((resolve) => res.write("", () => resolve()));
    await sleep(10);
    res.socket?.destroy();
    return false;
  }
}
