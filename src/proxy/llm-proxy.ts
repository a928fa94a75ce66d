import * as http from "node:http";
import * as https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { bearerTokenProblem, credentialsOf } from "../core/auth.js";
import { type Credentials, SCOPES } from "../core/credentials.js";
import type { ServerTls } from "../core/tls.js";
import { sleep } from "../core/retry.js";
import type { PendingWrites } from "../store/pending-writes.js";
import type { StoreApi } from "../store/store-api.js";
import { handleAdmin } from "./admin-routes.js";
import { inProcessOrder, promisedOrder, spanFirstOrder } from "./answer-order.js";
import { type BackendSource, staticBackends, storeBackends } from "./backend-source.js";
import type { Backend } from "./backends.js";
import { type CallHandlerDeps, handleCall } from "./call-handler.js";
import { handleCountTokens } from "./count-tokens.js";
import type { ForwardPolicy } from "./forward-call.js";
import { errorBody } from "./client-api.js";
import { sendError, sendJson } from "./http-io.js";
import { createMessagesApi } from "./messages-api.js";
import { createPauseGate, type PauseOptions, type PauseState } from "./pause-gate.js";
import { routeRequest } from "./proxy-routes.js";
import { PROXY_ROUTE_SCOPES } from "./route-scopes.js";
import { createResourceVersions } from "./resource-versions.js";
import { createResponsesApi } from "./responses-api.js";
import { createScopeChecker } from "./scope-check.js";
import { createSpanRecorder } from "./span-recorder.js";
import { createSpanStream } from "./span-stream.js";
import { createTokenIn, type TokenInStats } from "./token-in.js";
import { createUpstream, type UpstreamOptions } from "./upstream.js";
import { createConsoleLogger, type Logger } from "../core/logger.js";

/** Options of {@link createLlmProxy}. */
export interface LlmProxyOptions {
  /** Where calls are checked (rollout and attempt exist) and recorded (one span each). */
  store: StoreApi;
  /**
   * The pending writes of `store` when it runs in this process and no other server shares its data (memory, SQLite).
   * The proxy then answers first and stores the span right after, registering the write there; the store makes the
   * rollout's updates and span reads wait for it.
   */
  pendingWrites?: PendingWrites;
  /**
   * Without `pendingWrites`: promise each span to the store (`ExpectSpans`) and answer once it holds the promise,
   * storing the span right after (default true); false, or a store that cannot hold promises (PostgreSQL), stores
   * each span before the end of its answer is sent.
   */
  spanPromises?: boolean;
  /** With span promises: spans of calls that end within this many ms are stored in one `AddSpans` (default 5). */
  spanBatchMs?: number;
  /** Fixed backends; without them the proxy follows the `llm` resources of the store's latest snapshot. */
  backends?: readonly Backend[];
  /** With store backends: only the `llm` resources of these names. */
  resourceNames?: readonly string[];
  /** When set, every proxy route (LLM and admin) needs `authorization: Bearer <token>`. */
  token?: string;
  /** Scoped tokens instead of `token` (a single token is `admin`): each route needs the scope `PROXY_ROUTE_SCOPES` gives. */
  credentials?: Credentials;
  /** Retries of 429, 5xx, refused connections and timeouts, before any byte reached the client (default 3). */
  maxRetries?: number;
  /** Backoff before the first retry (default 200 ms; doubles, with jitter), and its cap (default 10,000 ms). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Engine timeouts. */
  upstream?: UpstreamOptions;
  /** Ask engines for `return_token_ids` (default `auto`: ask, and stop asking an engine that rejects it). */
  returnTokenIds?: "auto" | "always" | "never";
  /** Ask engines for chosen-token logprobs (default true). */
  requestLogprobs?: boolean;
  /**
   * Token-in mode for scoped chat, Responses and Messages calls (default false): each call after a rollout's first
   * goes to the engine as a token-id prompt that extends the previous call's ids exactly. An `llm` resource's
   * `sampling_parameters.agl_token_in` overrides it for its engine, a rollout's `metadata.agl_token_in` for the rollout.
   */
  tokenIn?: boolean;
  /** Largest request body (default 16 MiB). */
  maxBodyBytes?: number;
  /** Longest a call waits while paused before a 429 (default 300,000 ms). */
  pauseMaxWaitMs?: number;
  /** Longest a call waits for the first backends to be known before a 503 (default 2,000 ms). */
  noBackendWaitMs?: number;
  /** Where problems are reported (default: stderr, `[proxy]`). */
  logger?: Logger;
}

/** What `GET /proxy/status` reports. */
export interface ProxyStatus extends PauseState {
  backends: { endpoint: string; model: string; name?: string }[];
  resourcesId: string;
  resourcesVersion: number;
  requests: number;
  retries: number;
  /** Calls made without `/rollout/{id}/attempt/{id}`: served, counted here, not stored. */
  unattributedCalls: number;
  spansRecorded: number;
  spanWriteErrors: number;
  /** Answers by HTTP status. */
  responses: Record<string, number>;
  /** Token-in calls: first of a rollout, extended by ids, and fallen back to text (by reason). */
  tokenIn: TokenInStats;
}

/** The LLM proxy: a request handler plus the pause/drain controls. */
export interface LlmProxy {
  /** Serves a request; with `next`, requests that are not the proxy's go there instead of a 404. */
  handle(req: http.IncomingMessage, res: http.ServerResponse, next?: () => void): void;
  /** Serves the proxy on its own port (over TLS with `tls`); resolves to its URL. `close()` stops it. */
  listen(port?: number, host?: string, tls?: ServerTls): Promise<string>;
  pause(options?: PauseOptions): void;
  resume(): void;
  /** Resolves true once no call is in flight (false when `timeoutMs` passes first). */
  drain(timeoutMs?: number): Promise<boolean>;
  status(): ProxyStatus;
  /** Resolves once backends are known. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Creates the LLM proxy: OpenAI-compatible routes (chat completions, completions, and the Responses and Anthropic
 * Messages APIs served on the engine's chat completions; plain and attempt-scoped), sticky routing per rollout, token ids
 * and logprobs requested from engines, streaming passed through chunk by chunk, retries before the first byte,
 * pause/drain, and one span per attributed call in the store.
 */
export function createLlmProxy(options: LlmProxyOptions): LlmProxy {
  const logger = options.logger ?? createConsoleLogger({ prefix: "[proxy]" });
  // With store backends, their watch of resources feeds the versions too: one WatchResources stream, not two.
  const versions = createResourceVersions(options.store, logger, { follow: options.backends !== undefined });
  const source: BackendSource = options.backends
    ? staticBackends(options.backends)
    : storeBackends({
        store: options.store,
        resourceNames: options.resourceNames,
        onError: (e) => logger.warn(`watching resources failed: ${String(e)}`),
        onUpdate: versions.observe,
      });
  const gate = createPauseGate({ maxWaitMs: options.pauseMaxWaitMs });
  const credentials = credentialsOf(options);
  const promising = !options.pendingWrites && options.spanPromises !== false;
  const promised = promising
    ? promisedOrder(options.store, logger, {
        carry: (request) => recorder.carry(request),
        release: (request) => recorder.release(request),
        describe: (scope, promise) => recorder.describe(scope, promise),
      })
    : undefined;
  const order = options.pendingWrites ? inProcessOrder : (promised ?? spanFirstOrder);
  // A store in another process gets the spans as messages on one stream rather than calls of their own.
  const spanStream = options.pendingWrites ? undefined : createSpanStream(options.store, logger, promised);
  // There, an attempt's first call asks about it on that stream too, with its span's promise, rather than with a
  // GetRollout call of its own.
  const scopes = createScopeChecker(
    options.store,
    spanStream ? { describe: (scope, spanId) => (promised ? promised.describe(scope, spanId) : recorder.describe(scope)) } : {},
  );
  const recorder = createSpanRecorder({
    store: spanStream ? { ...options.store, addSpans: spanStream.addSpans } : options.store,
    scopes,
    pendingWrites: options.pendingWrites,
    onLost: order.lost,
    // Promised spans no answer waits for travel together: one AddSpans for the calls that end close together.
    batchLingerMs: promising ? (options.spanBatchMs ?? 5) : 0,
    logger,
  });
  const upstream = createUpstream(options.upstream);
  const tokenIn = createTokenIn({ upstream });
  const counters = { requests: 0, retries: 0, unattributedCalls: 0, responses: {} as Record<string, number> };
  const policy: ForwardPolicy = {
    upstream,
    record: (call, waiting) => recorder.record(call, waiting),
    order,
    maxRetries: options.maxRetries ?? 3,
    backoffBaseMs: options.backoffBaseMs ?? 200,
    backoffMaxMs: options.backoffMaxMs ?? 10_000,
    returnTokenIds: options.returnTokenIds ?? "auto",
    requestLogprobs: options.requestLogprobs ?? true,
    noTokenIds: new Set(),
    onRetry: () => counters.retries++,
  };
  let rotation = 0;

  const status = (): ProxyStatus => {
    const set = source.current();
    return {
      ...gate.state(),
      backends: (set?.backends ?? []).map((b) => ({ endpoint: b.endpoint, model: b.model, ...(b.name ? { name: b.name } : {}) })),
      resourcesId: set?.resourcesId ?? "",
      resourcesVersion: set?.resourcesVersion ?? 0,
      requests: counters.requests,
      retries: counters.retries,
      unattributedCalls: counters.unattributedCalls,
      ...recorder.stats(),
      responses: { ...counters.responses },
      tokenIn: tokenIn.stats(),
    };
  };

  const callDeps: CallHandlerDeps = {
    policy,
    gate,
    scopes,
    maxBodyBytes: options.maxBodyBytes ?? 16 * 1024 * 1024,
    async backends() {
      if (source.current()) return source.current();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([source.ready, new Promise((resolve) => (timer = setTimeout(resolve, options.noBackendWaitMs ?? 2_000)))]);
      clearTimeout(timer);
      return source.current();
    },
    async resourcesOf(scope, set) {
      const resourcesId = scope ? scopes.resourcesIdOf(scope) : "";
      if (!resourcesId) return { resourcesId: set.resourcesId, resourcesVersion: set.resourcesVersion };
      // The backends' own snapshot may be fresher than the watch of versions, a moment after a publish.
      const seen = set.resourcesId === resourcesId ? set.resourcesVersion : 0;
      return { resourcesId, resourcesVersion: Math.max(seen, await versions.versionOf(resourcesId)) };
    },
    onUnattributed() {
      if (counters.unattributedCalls++ === 0) {
        logger.warn("serving calls without /rollout/{rollout_id}/attempt/{attempt_id}; they are counted, not stored");
      }
    },
    rotation: () => rotation++,
    apis: { responses: createResponsesApi(), messages: createMessagesApi() },
    tokenIn,
    tokenInFor: (scope, backend) => scopes.tokenInOf(scope) ?? backend.tokenIn ?? options.tokenIn ?? false,
  };

  const handle = (req: http.IncomingMessage, res: http.ServerResponse, next?: () => void) => {
    const route = routeRequest(req.method ?? "GET", req.url ?? "/");
    if (!route) return next ? next() : sendError(res, 404, "not_found", `no route ${req.method} ${req.url}`);
    counters.requests++;
    res.on("finish", () => {
      counters.responses[res.statusCode] = (counters.responses[res.statusCode] ?? 0) + 1;
    });
    if (credentials !== undefined) {
      const what = `${req.method} ${(req.url ?? "/").split("?")[0]}`;
      // Anthropic clients send their key as `x-api-key`.
      const apiKey = req.headers["x-api-key"];
      const credential = req.headers.authorization ?? (typeof apiKey === "string" ? `Bearer ${apiKey}` : undefined);
      // A wrong method is told to any known token.
      const allowed = route.kind === "method_not_allowed" ? SCOPES : PROXY_ROUTE_SCOPES[route.kind];
      const problem = bearerTokenProblem(credential, credentials, allowed, what);
      if (problem) {
        if (route.kind === "call" || route.kind === "count_tokens") {
          const api = route.kind === "call" ? route.call : "messages";
          return sendJson(res, problem.status, errorBody(api, problem.status, problem.code, problem.message));
        }
        return sendError(res, problem.status, problem.code, problem.message);
      }
    }
    let work: Promise<void> | void;
    switch (route.kind) {
      case "method_not_allowed":
        return sendError(res, 405, "method_not_allowed", `use ${route.allow}`, { allow: route.allow });
      case "models": {
        const models = [...new Set((source.current()?.backends ?? []).map((b) => b.model))];
        return sendJson(res, 200, { object: "list", data: models.map((id) => ({ id, object: "model", created: 0, owned_by: "agl" })) });
      }
      case "admin":
        work = handleAdmin(proxy, route.action, req, res);
        break;
      case "count_tokens":
        work = handleCountTokens({ ...callDeps, messages: callDeps.apis.messages, upstream }, req, res);
        break;
      case "call":
        work = handleCall(callDeps, route, req, res);
        break;
    }
    work.catch((error: unknown) => {
      logger.error(
        `unexpected error on ${req.method} ${req.url}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      if (!res.headersSent) sendError(res, 500, "internal_error", "the proxy failed unexpectedly; see its log");
      else res.destroy();
    });
  };

  let server: http.Server | undefined;
  const sockets = new Set<Socket>();
  const proxy: LlmProxy = {
    handle,
    async listen(port = 0, host = "127.0.0.1", tls?: ServerTls) {
      const serverOptions = { keepAliveTimeout: 65_000, headersTimeout: 30_000, requestTimeout: 0 };
      const mutual = tls?.ca === undefined ? {} : { requestCert: true, rejectUnauthorized: true };
      server = tls
        ? https.createServer({ ...serverOptions, ...tls, ...mutual }, (req, res) => handle(req, res))
        : http.createServer(serverOptions, (req, res) => handle(req, res));
      server.on("connection", (socket) => {
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        server?.once("error", reject);
        server?.listen(port, host, () => resolve());
      });
      const address = server.address() as AddressInfo;
      return `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
    },
    pause: (opts) => gate.pause(opts),
    resume: () => gate.resume(),
    drain: (timeoutMs) => gate.drain(timeoutMs),
    status,
    ready: source.ready,
    async close() {
      source.close();
      versions.close();
      if (server) {
        const closed = new Promise<void>((resolve) => server?.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.race([closed, sleep(2_000, { unref: true })]);
        for (const socket of sockets) socket.destroy();
      }
      // The attempts' holds go back after the spans of their calls, so that no attempt's end waits for their TTL (a
      // store that does not answer is not waited for long).
      if (promised) await Promise.race([promised.releaseAll(), sleep(2_000, { unref: true })]);
      recorder.flush();
      spanStream?.close();
      upstream.close();
    },
  };
  return proxy;
}
