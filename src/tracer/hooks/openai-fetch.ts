import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import {
  AGL_LLM_HTTP_STATUS,
  AGL_LLM_LATENCY_MS,
  AGL_LLM_REQUEST,
  AGL_LLM_RESPONSE,
  AGL_LLM_SOURCE,
  AGL_LLM_STREAM,
  AGL_LLM_TTFT_MS,
  GEN_AI_OPERATION_NAME,
  GEN_AI_PROVIDER_NAME,
  GEN_AI_SYSTEM,
  LlmSource,
} from "../../core/semconv.js";
import { type AttributeMap, attr } from "../attributes.js";
import { currentAttempt } from "../attempt-scope.js";
import { aglTracer, parentContext, setTypedAttributes } from "../provider.js";
import { type AgentApi, agentRequestAttributes, agentResponseAttributes, createAgentStreamAssembler } from "./agent-api-wire.js";
import { createStreamAssembler, type OpenAiKind, requestAttributes, responseAttributes } from "./openai-wire.js";
import { createSseParser } from "./sse-parser.js";

/** Options of {@link createTracingFetch}. */
export interface TracingFetchOptions {
  /** The fetch to wrap. Default: the global fetch. */
  fetch?: typeof fetch;
  /** Raw request and response bodies longer than this are cut in the span (token ids are kept whole). Default 1 MiB. */
  maxBodyChars?: number;
}

const kindOf = (url: string): OpenAiKind | AgentApi | undefined => {
  const path = new URL(url).pathname.replace(/\/+$/, "");
  if (path.endsWith("/chat/completions")) return "chat";
  if (path.endsWith("/completions")) return "completions";
  if (path.endsWith("/responses")) return "responses";
  if (path.endsWith("/messages")) return "messages";
  return undefined;
};
const isAgentApi = (kind: OpenAiKind | AgentApi): kind is AgentApi => kind === "responses" || kind === "messages";

/**
 * A `fetch` for the openai client (and anything that speaks the OpenAI wire format, or the Anthropic client) that
 * records every chat completions, completions, Responses and Messages call made inside a rollout as a `chat {model}`
 * span: the exact request (for Responses and Messages also the chat request it maps to), the raw response
 * (for a stream, the completion assembled from its chunks, which pass through untouched), usage, and the token ids and
 * logprobs that vLLM-style engines return (`prompt_token_ids`, `token_ids`). Outside a rollout it just fetches.
 *
 * @example
 * ```ts
 * const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.apiKey ?? "none", fetch: createTracingFetch() });
 * ```
 */
export function createTracingFetch(options: TracingFetchOptions = {}): typeof fetch {
  const base = options.fetch ?? globalThis.fetch;
  const maxChars = options.maxBodyChars ?? 1 << 20;
  const cut = (text: string) => (text.length > maxChars ? `${text.slice(0, maxChars)}…[${text.length - maxChars} more chars]` : text);

  return async function tracingFetch(input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> {
    const scope = currentAttempt();
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const kind = kindOf(url);
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
    if (!scope || !kind || method !== "POST") return base(input, init);
    const requestText = typeof init?.body === "string" ? init.body : input instanceof Request ? await input.clone().text() : undefined;
    let request: Record<string, unknown> = {};
    try {
      if (requestText) request = JSON.parse(requestText);
    } catch {}
    const model = typeof request.model === "string" ? request.model : "unknown";
    const operation = kind === "completions" ? "text_completion" : "chat";
    const provider = kind === "messages" ? "anthropic" : "openai";
    const stream = request.stream === true;
    const startedAtMs = performance.timeOrigin + performance.now();
    const span = aglTracer().startSpan(`${operation} ${model}`, { kind: SpanKind.CLIENT }, parentContext(scope));
    const set = (attributes: AttributeMap) => setTypedAttributes(span, attributes);
    set({
      [AGL_LLM_SOURCE]: attr.str(LlmSource.openaiFetch),
      [GEN_AI_OPERATION_NAME]: attr.str(operation),
      [GEN_AI_PROVIDER_NAME]: attr.str(provider),
      [GEN_AI_SYSTEM]: attr.str(provider),
      [AGL_LLM_STREAM]: attr.bool(stream),
      ...(isAgentApi(kind)
        ? agentRequestAttributes(request, requestText && cut(requestText), kind)
        : { ...(requestText ? { [AGL_LLM_REQUEST]: attr.str(cut(requestText)) } : {}), ...requestAttributes(request, kind) }),
    });
    const elapsed = () => performance.timeOrigin + performance.now() - startedAtMs;
    const finish = (body: unknown, rawText: string | undefined, error?: string) => {
      const attributes =
        body === undefined
          ? {}
          : isAgentApi(kind)
            ? agentResponseAttributes(body as Record<string, unknown>, kind)
            : responseAttributes(body, kind);
      set({
        ...attributes,
        [AGL_LLM_LATENCY_MS]: attr.double(elapsed()),
        ...(rawText === undefined ? {} : { [AGL_LLM_RESPONSE]: attr.str(cut(rawText)) }),
      });
      if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      span.end();
      const responseId = (body as { id?: unknown } | undefined)?.id;
      scope.llmCalls.add({
        ...(typeof responseId === "string" ? { responseId } : {}),
        model,
        startedAtMs,
        spanId: span.spanContext().spanId,
        attributes,
      });
    };

    let response: Response;
    try {
      response = await base(input, init);
    } catch (error) {
      span.recordException(error as Error);
      finish(undefined, undefined, error instanceof Error ? error.message : String(error));
      throw error;
    }
    set({ [AGL_LLM_HTTP_STATUS]: attr.int(response.status), [AGL_LLM_TTFT_MS]: attr.double(elapsed()) });
    const isSse = (response.headers.get("content-type") ?? "").includes("text/event-stream");
    if (!response.ok || !isSse || !response.body) {
      const text = await response.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {}
      finish(response.ok ? body : undefined, text, response.ok ? undefined : `HTTP ${response.status}`);
      return new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
    }

    // A stream passes through chunk by chunk; the span ends when it does.
    const agentStream = isAgentApi(kind) ? createAgentStreamAssembler(kind) : undefined;
    const assembler = agentStream ?? createStreamAssembler(kind as OpenAiKind);
    let sawDone = false;
    const parser = createSseParser((data) => {
      if (data === "[DONE]") {
        sawDone = true;
        return;
      }
      try {
        assembler.add(JSON.parse(data));
      } catch {}
    });
    // Responses and Messages streams have no [DONE]: their last event says the answer is whole.
    const whole = () => sawDone || agentStream?.complete() === true;
    const decoder = new TextDecoder();
    let ended = false;
    const end = (error?: string) => {
      if (ended) return;
      ended = true;
      parser.end();
      const body = assembler.result();
      finish(body, JSON.stringify(body), error);
    };
    const tap = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        parser.feed(decoder.decode(chunk, { stream: true }));
        controller.enqueue(chunk);
      },
      flush: () => end(),
    });
    const body = response.body.pipeThrough(tap, { preventCancel: false });
    const reader = body.getReader();
    const passthrough = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          end(`the stream broke: ${error instanceof Error ? error.message : String(error)}`);
          controller.error(error);
        }
      },
      cancel(reason) {
        // The openai client cancels the body once it has read `[DONE]`: by then it has the whole answer.
        end(whole() ? undefined : "the client stopped reading the stream");
        return reader.cancel(reason);
      },
    });
    return new Response(passthrough, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
