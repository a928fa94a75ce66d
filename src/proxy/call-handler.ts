import type * as http from "node:http";
import { performance } from "node:perf_hooks";
import { type BackendSet, backendsForModel, routeOrder } from "./backends.js";
import { traceIdsFor } from "./call-span.js";
import { type CallPlan, type CallResources, type ForwardPolicy, forwardCall } from "./forward-call.js";
import type { Backend } from "./backends.js";
import { ApiRequestError, type ClientApi, chatShape, errorBody, type Json } from "./client-api.js";
import { BodyTooLargeError, readRequestBody, sendJson } from "./http-io.js";
import type { PauseGate } from "./pause-gate.js";
import type { ProxyRoute } from "./proxy-routes.js";
import type { CallScope, ScopeChecker } from "./scope-check.js";
import type { TokenIn } from "./token-in.js";

/** What {@link handleCall} works with; one per proxy. */
export interface CallHandlerDeps {
  policy: ForwardPolicy;
  gate: PauseGate;
  scopes: ScopeChecker;
  maxBodyBytes: number;
  /** The backends in force, waiting a little for the first ones. */
  backends(): Promise<BackendSet | undefined>;
  /** The resources to stamp a call with: its rollout's, else those the backends came from. */
  resourcesOf(scope: CallScope | undefined, set: BackendSet): Promise<CallResources>;
  /** A call came without rollout/attempt scope. */
  onUnattributed(): void;
  /** Rotates unscoped calls over the engines. */
  rotation(): number;
  /** The APIs served by translation onto chat completions. */
  apis: Record<ClientApi["name"], ClientApi>;
  tokenIn: TokenIn;
  /** Whether a scoped call goes in token-in mode: its rollout's `agl_token_in`, else its engine's, else the proxy's. */
  tokenInFor(scope: CallScope, backend: Backend): boolean;
}

/**
 * Serves one LLM call: reads and checks the body (400/413 with clear messages), checks the scope against the store
 * (404/409), picks the engines (503 without any, 404 for a model none serves), waits at the pause gate (or 429), then
 * forwards it. Resolves when the answer is complete.
 */
export async function handleCall(
  deps: CallHandlerDeps,
  route: Extract<ProxyRoute, { kind: "call" }>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const sendError = (
    r: http.ServerResponse,
    status: number,
    code: string,
    message: string,
    headers: http.OutgoingHttpHeaders = {},
    param?: string,
  ) => sendJson(r, status, errorBody(route.call, status, code, message, param), headers);
  const startTime = Date.now() / 1000;
  const startedAt = performance.now();
  // The client may leave at any point: waiting in the gate, or mid-answer (then the engine's stream is stopped).
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  let raw: Buffer;
  try {
    raw = await readRequestBody(req, deps.maxBodyBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) return sendError(res, 413, "request_too_large", error.message, { connection: "close" });
    if (abort.signal.aborted || req.destroyed) return; // the client left while sending its body
    throw error;
  }
  const requestText = raw.toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(requestText);
  } catch (error) {
    return sendError(res, 400, "invalid_json", `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return sendError(res, 400, "invalid_request", "the request body must be a JSON object");
  }
  const body = parsed as Json;
  if (route.call === "chat" && !Array.isArray(body.messages))
    return sendError(res, 400, "invalid_request", "`messages` must be an array of chat messages");
  if (route.call === "completions" && body.prompt === undefined) return sendError(res, 400, "invalid_request", "`prompt` is required");
  let request = body;
  let client: CallPlan["client"];
  if (route.call === "responses" || route.call === "messages") {
    const api = deps.apis[route.call];
    try {
      request = api.toChat(body);
    } catch (error) {
      if (!(error instanceof ApiRequestError)) throw error;
      return sendError(res, 400, "invalid_request", error.message, {}, error.param);
    }
    client = { api: route.call, shape: api, body, text: requestText };
  }
  const ids = traceIdsFor(req.headers.traceparent);
  const scope = route.scope;
  if (scope) {
    const refusal = await deps.scopes.check(scope, ids.spanId);
    if (refusal) {
      deps.policy.order.unused(scope, ids.spanId);
      return sendError(res, refusal.status, refusal.code, refusal.message);
    }
  } else {
    deps.onUnattributed();
  }
  try {
    const set = await deps.backends();
    if (!set)
      return sendError(res, 503, "no_backend", "no engine is configured yet: publish an LLM resource or pass --backend", {
        "retry-after": "1",
      });
    const model = typeof request.model === "string" ? request.model : undefined;
    const { backends, rewrite } = backendsForModel(set.backends, model);
    if (backends.length === 0) {
      const served = [...new Set(set.backends.map((b) => b.model))].join(", ");
      return sendError(res, 404, "model_not_found", `model ${JSON.stringify(model)} is not served here; models: ${served}`);
    }
    const refused = await deps.gate.enter(abort.signal);
    if (refused) {
      if (refused.reason === "aborted") return;
      const message =
        refused.reason === "paused"
          ? "the proxy is paused for a weight update; retry later"
          : "the proxy stayed paused too long; retry later";
      return sendError(res, 429, "proxy_paused", message, { "retry-after": String(refused.retryAfterSeconds) });
    }
    try {
      const order = routeOrder(backends, scope?.rolloutId, deps.rotation());
      let tokenPlan: Awaited<ReturnType<TokenIn["plan"]>> | undefined;
      if (scope && route.call !== "completions" && deps.tokenInFor(scope, order[0] as Backend)) {
        tokenPlan = await deps.tokenIn.plan(`${scope.rolloutId}/${scope.attemptId}`, request, order[0] as Backend, abort.signal);
        // The answer is rebuilt from the engine's, in chat shape when the client called chat completions.
        client ??= { api: "chat", shape: chatShape, body, text: requestText };
      }
      const plan: CallPlan = {
        kind: route.call === "completions" ? "completions" : "chat",
        scope,
        request,
        requestText: client && client.api !== "chat" ? JSON.stringify(request) : requestText,
        client,
        engine: tokenPlan?.engine,
        onAnswer: tokenPlan?.onAnswer,
        spanAttributes: tokenPlan?.attributes,
        ids,
        order,
        rewrite,
        resources: await deps.resourcesOf(scope, set),
        startTime,
        startedAt,
      };
      await forwardCall(deps.policy, plan, res, abort.signal);
    } finally {
      deps.gate.leave();
    }
  } finally {
    // A call that ends before it is forwarded (no engine, a model nobody serves, the pause gate, the client gone)
    // does not leave the promise its check sent to wait out the store's TTL.
    if (scope) deps.policy.order.unused(scope, ids.spanId);
  }
}
