import * as http from "node:http";
import type { Interceptor } from "@connectrpc/connect";
import { createConnectNodeHandler } from "./connect-node-handler.js";
import type { ServerLogger } from "./error-logging.js";
import type { ServiceRegistration } from "./service-registration.js";

/** A plain Node HTTP handler, for routes beside the RPC services (OTLP `/v1/traces`, the LLM proxy). */
export type HttpFallback = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Options of {@link createHttpServer}. */
export interface HttpServerOptions {
  services: readonly ServiceRegistration[];
  interceptors: readonly Interceptor[];
  maxMessageBytes: number;
  /** Aborting it ends every call's signal (graceful shutdown). */
  shutdownSignal: AbortSignal;
  /** Whether `GET /healthz` answers SERVING. */
  isServing: () => boolean;
  /** Requests no RPC route matches; default: 404. */
  fallback?: HttpFallback;
  /** Where handler failures are reported. */
  logger: ServerLogger;
}

/**
 * The HTTP/1.1 side: an `http.Server` (never listening itself; the front server hands it connections) running
 * connect-node (through createConnectNodeHandler) for Connect (JSON and binary), gRPC-Web, unary and server-streaming,
 * plus `GET /healthz`.
 */
export function createHttpServer(options: HttpServerOptions): http.Server {
  const fallback = options.fallback ?? notFound;
  const rpc = createConnectNodeHandler({
    services: options.services,
    interceptors: options.interceptors,
    readMaxBytes: options.maxMessageBytes,
    writeMaxBytes: options.maxMessageBytes,
    shutdownSignal: options.shutdownSignal,
    fallback,
    logger: options.logger,
  });
  const timeouts = { headersTimeout: 30_000, requestTimeout: 120_000, keepAliveTimeout: 65_000 };
  const server = http.createServer(timeouts, (req, res) => {
    if (options.shutdownSignal.aborted) res.setHeader("connection", "close");
    const probe = req.url === "/healthz" && (req.method === "GET" || req.method === "HEAD");
    if (probe) return healthz(res, options.isServing());
    rpc(req, res);
  });
  // Header and request timeouts are enforced by a checker Node starts on 'listening'; this server never listens.
  server.emit("listening");
  return server;
}

function healthz(res: http.ServerResponse, serving: boolean): void {
  const body = JSON.stringify({ status: serving ? "SERVING" : "NOT_SERVING" });
  res.writeHead(serving ? 200 : 503, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function notFound(_req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(404, { "content-type": "application/json" });
  res.end(JSON.stringify({ code: "not_found", message: "no such route" }));
}
