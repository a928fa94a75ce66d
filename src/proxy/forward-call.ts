import type * as http from "node:http";
import { performance } from "node:perf_hooks";
import { backoffMs, sleep } from "../core/retry.js";
import type { AnswerOrder, CallOrder } from "./answer-order.js";
import type { Backend } from "./backends.js";
import { upstreamUrl } from "./backends.js";
import type { CallRecord } from "./call-span.js";
import { type ApiName, assistantMessage, type ClientApi, chatAnswer, errorBody, type Json } from "./client-api.js";
import { type CallKind, type CompletionRecord, readCompletion } from "./completion-reader.js";
import { sendJson } from "./http-io.js";
import type { CallScope } from "./scope-check.js";
import { answerIds, streamThrough } from "./stream-through.js";
import { isRetryableStatus, readBody, type Upstream, type UpstreamError, type UpstreamResponse } from "./upstream.js";

/** How calls are forwarded; shared by every call of a proxy. */
export interface ForwardPolicy {
  upstream: Upstream;
  /** Stores the call's span; `waiting`: the answer waits for it (else the write may join a batch). */
  record(call: CallRecord, waiting: boolean): Promise<void>;
  /** Whether each answer may end before its span is stored (the store then waits for the span). */
  order: AnswerOrder;
  /** Tries after the first one for 429, 5xx, refused connections and timeouts (before any byte reached the client). */
  maxRetries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** `auto`: ask, and stop asking an engine that rejects the field; `always`; `never`. */
  returnTokenIds: "auto" | "always" | "never";
  requestLogprobs: boolean;
  /** Endpoints that rejected `return_token_ids` (auto mode). */
  noTokenIds: Set<string>;
  onRetry(): void;
}

/** The resources snapshot a call is recorded under. */
export interface CallResources {
  resourcesId: string;
  resourcesVersion: number;
}

/** How an engine's completions answers become chat completions (token-in mode sends token-id prompts). */
export interface ToChat {
  whole(body: Json): Json;
  stream(): { push(chunk: Json): Json[]; end(): Json[] };
}

/** A call whose client API is not what the engine is sent: how to answer the client in its own API. */
export interface ClientSide {
  api: ApiName;
  shape: Pick<ClientApi, "fromChat" | "stream" | "remember">;
  /** The client's body, parsed and as sent. */
  body: Json;
  text: string;
}

/** One call, routed and ready to go. */
export interface CallPlan {
  /** The engine API of `request`. */
  kind: CallKind;
  scope: CallScope | undefined;
  /** The chat completions or completions request the call stands for (the client's body, or its translation). */
  request: Record<string, unknown>;
  /** `request` as text: the client's body exactly as sent, when not translated. */
  requestText: string;
  /** Set when the client called another API (Responses, Messages) or the answer is rebuilt (token-in). */
  client?: ClientSide;
  /** Set when the engine is sent something else than `request` (token-in: a token-id prompt). */
  engine?: { kind: CallKind; body: Json; toChat: ToChat };
  /** Called with each complete answer (as a chat completion) before the client gets its end. */
  onAnswer?: (completion: CompletionRecord, chat: Json) => void;
  /** Attributes the span gets on top (token-in's outcome). */
  spanAttributes?: Record<string, string | number | boolean>;
  ids: { traceId: string; spanId: string; parentId: string };
  /** Backends in the order to try them. */
  order: Backend[];
  /** Model name to send instead of the client's. */
  rewrite: string | undefined;
  /** The resources the call is stamped with: its rollout's id and that id's current version. */
  resources: CallResources;
  /** Epoch seconds and `performance.now()` at arrival. */
  startTime: number;
  startedAt: number;
}

/**
 * Ends the answer (`send`) and records the call, in the order `answerFirst` (from the policy's order) gives; without
 * it (a call without scope) nothing is recorded. Answer first: `record` runs in the same tick as `send`, so an
 * in-process write is registered before the client can act on the answer.
 */
async function endAndRecord(
  answerFirst: (() => Promise<boolean>) | undefined,
  send: () => void,
  record: (waiting: boolean) => Promise<void>,
): Promise<void> {
  if (!answerFirst) return send();
  if (await answerFirst()) {
    send();
    return record(false);
  }
  await record(true);
  send();
}

const parseCompletion = (text: Buffer): CompletionRecord | undefined => {
  try {
    return readCompletion(JSON.parse(text.toString("utf8")));
  } catch {
    return undefined;
  }
};

function upstreamBody(plan: CallPlan, policy: ForwardPolicy, backend: Backend): { body: Buffer; askedIds: boolean } {
  const askedIds = policy.returnTokenIds === "always" || (policy.returnTokenIds === "auto" && !policy.noTokenIds.has(backend.endpoint));
  const request = plan.engine?.body ?? plan.request;
  const kind = plan.engine?.kind ?? plan.kind;
  const extra: Record<string, unknown> = {};
  if (plan.rewrite !== undefined) extra.model = plan.rewrite;
  if (askedIds) extra.return_token_ids = true;
  if (policy.requestLogprobs) {
    if (kind === "chat") extra.logprobs = true;
    else if (typeof request.logprobs !== "number") extra.logprobs = 0;
  }
  // An answer rebuilt in another API needs the usage of a stream (a chat client gets what it asked for).
  if (plan.client && plan.client.api !== "chat" && request.stream === true)
    extra.stream_options = { ...(request.stream_options as Json | undefined), include_usage: true };
  const keys = Object.keys(extra);
  // Appending the new fields to the client's own text saves re-serializing a large prompt; only when no key repeats.
  const text = plan.engine ? "" : plan.requestText.trimEnd();
  if (text.endsWith("}") && Object.keys(request).length > 0 && keys.every((k) => !(k in request))) {
    const tail = keys.map((k) => `,${JSON.stringify(k)}:${JSON.stringify(extra[k])}`).join("");
    return { body: Buffer.from(`${text.slice(0, -1)}${tail}}`), askedIds };
  }
  return { body: Buffer.from(JSON.stringify({ ...request, ...extra })), askedIds };
}

/**
 * Forwards a call with retries, answers the client (streamed chunk by chunk, or whole) and records its span. Retries
 * happen only before the first byte of the answer reached the client; after that a failure ends the answer with an
 * error event. Never throws.
 */
export async function forwardCall(policy: ForwardPolicy, plan: CallPlan, res: http.ServerResponse, signal: AbortSignal): Promise<void> {
  // Calls without scope are not stored.
  const order = plan.scope && policy.order.begin(plan.scope, plan.ids.spanId);
  try {
    await forwardAndRecord(policy, plan, res, signal, order);
  } finally {
    order?.recorded(); // also should it throw: a hold's release does not wait for a call that is over
  }
}

async function forwardAndRecord(
  policy: ForwardPolicy,
  plan: CallPlan,
  res: http.ServerResponse,
  signal: AbortSignal,
  order: CallOrder | undefined,
): Promise<void> {
  const stream = plan.request.stream === true;
  const api = plan.client?.api ?? plan.kind;
  const sendError = (r: http.ServerResponse, status: number, code: string, message: string) =>
    sendJson(r, status, errorBody(api, status, code, message));
  const answerFirst = order ? () => order.answerFirst() : undefined;
  const base: Omit<CallRecord, "endTime" | "httpStatus" | "completion" | "error" | "tries" | "backendEndpoint" | "timeToFirstByteMs"> = {
    scope: plan.scope,
    kind: plan.kind,
    ...plan.ids,
    request: plan.request,
    requestText: plan.requestText,
    api,
    clientRequestText: plan.client && plan.client.api !== "chat" ? plan.client.text : undefined,
    extraAttributes: plan.spanAttributes,
    stream,
    startTime: plan.startTime,
    ...plan.resources,
  };
  const finish = (
    waiting: boolean,
    httpStatus: number,
    tries: number,
    backend: Backend | undefined,
    ttfb: number | undefined,
    completion: CompletionRecord | undefined,
    error?: { type: string; message: string },
  ) => {
    const written = policy.record(
      {
        ...base,
        endTime: plan.startTime + (performance.now() - plan.startedAt) / 1000,
        httpStatus,
        tries,
        backendEndpoint: backend?.endpoint,
        timeToFirstByteMs: ttfb,
        completion,
        error,
      },
      waiting,
    );
    order?.recorded();
    return written;
  };

  let tries = 0;
  let probing = 0;
  for (;;) {
    const backend = plan.order[tries % plan.order.length] as Backend;
    tries++;
    const { body, askedIds } = upstreamBody(plan, policy, backend);
    const url = upstreamUrl(backend.endpoint, (plan.engine?.kind ?? plan.kind) === "chat" ? "/chat/completions" : "/completions");
    let upstream: UpstreamResponse;
    try {
      upstream = await policy.upstream.post(url, body, backend.apiKey, signal);
    } catch (error) {
      const e = error as UpstreamError;
      if (e.kind === "aborted")
        return finish(false, 499, tries, backend, undefined, undefined, { type: "client_disconnected", message: e.message });
      if (tries <= policy.maxRetries) {
        policy.onRetry();
        await sleep(backoffMs(tries, policy.backoffBaseMs, policy.backoffMaxMs), { signal });
        continue;
      }
      const status = e.kind === "timeout" ? 504 : 502;
      const message = `the engine did not answer after ${tries} ${tries === 1 ? "try" : "tries"}: ${e.message}`;
      return endAndRecord(
        answerFirst,
        () => sendError(res, status, e.kind === "timeout" ? "engine_timeout" : "engine_unavailable", message),
        (waiting) => finish(waiting, status, tries, backend, undefined, undefined, { type: "upstream_error", message }),
      );
    }
    const ttfb = performance.now() - plan.startedAt;
    const { status } = upstream;
    if (status >= 400) {
      let text: Buffer;
      try {
        text = await readBody(upstream.body);
      } catch {
        text = Buffer.alloc(0);
      }
      if (
        status === 400 &&
        askedIds &&
        policy.returnTokenIds === "auto" &&
        text.includes("return_token_ids") &&
        probing++ < plan.order.length
      ) {
        // The engine does not know the field: stop asking it, and repeat this try without it.
        policy.noTokenIds.add(backend.endpoint);
        tries--;
        continue;
      }
      if (isRetryableStatus(status) && tries <= policy.maxRetries && !signal.aborted) {
        policy.onRetry();
        await sleep(backoffMs(tries, policy.backoffBaseMs, policy.backoffMaxMs, upstream.retryAfter), { signal });
        if (!signal.aborted) continue;
      }
      const message = `the engine answered ${status}: ${text.toString("utf8").slice(0, 500)}`;
      const send = () => {
        if (res.headersSent || signal.aborted) return void res.end();
        if (plan.client?.api === "messages") return sendJson(res, status, errorBody("messages", status, "engine_error", message));
        const headers: http.OutgoingHttpHeaders = {
          "content-type": upstream.contentType ?? "application/json",
          "content-length": text.length,
        };
        if (upstream.retryAfter) headers["retry-after"] = upstream.retryAfter;
        res.writeHead(status, headers);
        res.end(text);
      };
      return endAndRecord(answerFirst, send, (waiting) =>
        finish(waiting, status, tries, backend, ttfb, undefined, { type: "upstream_status", message }),
      );
    }
    const isStream = stream && /text\/event-stream/i.test(upstream.contentType ?? "");
    if (isStream) {
      const outcome = await streamThrough(
        upstream,
        res,
        {
          kind: plan.engine?.kind ?? plan.kind,
          spanId: plan.ids.spanId,
          assemble: plan.scope !== undefined || plan.client !== undefined,
          toChat: plan.engine?.toChat.stream(),
          writer: plan.client?.shape.stream(plan.client.body),
        },
        signal,
      );
      if (plan.onAnswer || plan.client?.shape.remember) {
        const { completion, error } = outcome.result();
        if (!error) answered(plan, completion.body, completion);
      }
      return endAndRecord(answerFirst, outcome.release, (waiting) => {
        const { completion, error } = outcome.result();
        const finalStatus = error ? (error.type === "client_disconnected" ? 499 : 502) : status;
        return finish(waiting, finalStatus, tries, backend, ttfb, completion, error);
      });
    }
    let text: Buffer;
    try {
      text = await readBody(upstream.body);
    } catch (error) {
      const message = `the engine's answer broke off: ${error instanceof Error ? error.message : String(error)}`;
      const disconnected = signal.aborted;
      return endAndRecord(
        answerFirst,
        () => (disconnected ? void res.end() : sendError(res, 502, "engine_broke_off", message)),
        (waiting) =>
          finish(waiting, disconnected ? 499 : 502, tries, backend, ttfb, undefined, {
            type: disconnected ? "client_disconnected" : "upstream_error",
            message,
          }),
      );
    }
    // Read for the span: answering first, after the answer went out (parsing the engine's JSON is on no one's path).
    let completion: () => CompletionRecord | undefined;
    if (plan.client) {
      let rebuilt: ReturnType<typeof rebuildWhole>;
      try {
        rebuilt = rebuildWhole(plan, plan.client, text);
      } catch (error) {
        const message = `the engine's answer is not JSON: ${(error as Error).message}`;
        return endAndRecord(
          answerFirst,
          () => sendError(res, 502, "engine_broke_off", message),
          (waiting) => finish(waiting, 502, tries, backend, ttfb, undefined, { type: "upstream_error", message }),
        );
      }
      text = rebuilt.text;
      completion = () => rebuilt.completion;
    } else completion = () => parseCompletion(text);
    const send = () => {
      if (signal.aborted) return;
      res.writeHead(status, {
        "content-type": plan.client ? "application/json" : (upstream.contentType ?? "application/json"),
        "content-length": text.length,
        "x-agl-span-id": plan.ids.spanId,
      });
      res.end(text);
    };
    return endAndRecord(answerFirst, send, (waiting) => finish(waiting, status, tries, backend, ttfb, completion()));
  }
}

/**
 * Rebuilds a whole answer: from the engine's completion (token-in) to chat, and to the client's API. Throws when the
 * engine's body is not JSON.
 */
function rebuildWhole(plan: CallPlan, client: ClientSide, text: Buffer): { text: Buffer; completion: CompletionRecord } {
  const parsed = JSON.parse(text.toString("utf8"));
  const body = plan.engine ? plan.engine.toChat.whole(parsed) : parsed;
  const completion = readCompletion(body);
  answered(plan, completion.body, completion);
  return { text: Buffer.from(JSON.stringify(client.shape.fromChat(body, client.body, answerIds(completion)))), completion };
}

/** A complete answer: the client API remembers the conversation (`previous_response_id`), token-in its ids. */
function answered(plan: CallPlan, body: Json, completion: CompletionRecord): void {
  plan.onAnswer?.(completion, body);
  if (!plan.client?.shape.remember || !completion.responseId) return;
  const messages = Array.isArray(plan.request.messages) ? (plan.request.messages as Json[]) : [];
  plan.client.shape.remember(completion.responseId, [...messages, assistantMessage(chatAnswer(body))], plan.client.body);
}
