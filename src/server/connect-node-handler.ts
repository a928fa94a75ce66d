import type * as http from "node:http";
import { Code, ConnectError, createConnectRouter, type ConnectRouterOptions, type Interceptor } from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { ServerLogger } from "./error-logging.js";
import { errorResponse } from "./error-response.js";
import { connectRoutes, type ServiceRegistration } from "./service-registration.js";
import { withUndecodableRequestsAsInvalid } from "./undecodable-request.js";

/** Options of {@link createConnectNodeHandler}. */
export interface ConnectNodeHandlerOptions extends Omit<ConnectRouterOptions, "interceptors"> {
  services: readonly ServiceRegistration[];
  interceptors: readonly Interceptor[];
  /** Requests for paths no RPC serves. */
  fallback: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  logger: ServerLogger;
}

/**
 * A Node HTTP/1.1 handler for Connect, gRPC-Web and gRPC over HTTP/1.1: connect-node's `connectNodeAdapter`, with
 * each procedure's handler wrapped so that undecodable request bodies are the client's error (INVALID_ARGUMENT), not
 * the server's (see undecodable-request.ts), and so that every call gets an answer even when connect-es fails to
 * produce one.
 */
export function createConnectNodeHandler(
  options: ConnectNodeHandlerOptions,
): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const { services, fallback, logger, ...routerOptions } = options;
  const router = createConnectRouter({
    acceptCompression: [compressionGzip, compressionBrotli],
    ...routerOptions,
    interceptors: [...options.interceptors],
  });
  connectRoutes(services)(router);
  const handlers = new Map(router.handlers.map((handler) => [handler.requestPath, withUndecodableRequestsAsInvalid(handler)]));
  return (req, res) => {
    const handler = handlers.get(req.url?.split("?", 2)[0] ?? "");
    if (handler === undefined) return fallback(req, res);
    // connect-es answers a bidirectional stream over HTTP/1.1 with a bare 505; say what to use instead.
    if (handler.method.methodKind === "bidi_streaming") {
      const { name } = handler.method;
      const unary = handler.service.methods.find((m) => m.methodKind === "unary" && `${m.name}Stream` === name);
      const error = new ConnectError(
        `${name} is a bidirectional stream, which needs gRPC over HTTP/2${unary ? `; over HTTP/1.1 call ${unary.name}` : ""}`,
        Code.Unimplemented,
      );
      return void universalResponseToNodeResponse(errorResponse(String(req.headers["content-type"] ?? ""), error), res).catch(() =>
        res.destroy(),
      );
    }
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
      .catch((reason: unknown) => errorResponse(String(req.headers["content-type"] ?? ""), answerFor(reason, handler.requestPath, logger)))
      .then((response) => universalResponseToNodeResponse(response, res))
      .catch((reason: unknown) => {
        // Once the answer has begun, a failure can only end the connection (the client sees it cut, never hanging).
        if (!res.writableEnded) res.destroy();
        // ABORTED: the client went away mid-answer; nothing to report.
        if (ConnectError.from(reason).code === Code.Aborted) return;
        logger.error(`handler for ${handler.requestPath} failed:`, reason);
      });
  };
}

/**
 * The error to answer when connect-es could not answer a call at all (it would leave the client waiting). A
 * URIError comes from percent-encoding a status message that quotes a lone surrogate of the request (gRPC trailers):
 * the request's fault.
 */
function answerFor(reason: unknown, path: string, logger: ServerLogger): ConnectError {
  // The client went away: there is no one to answer, and nothing to report.
  if (ConnectError.from(reason).code === Code.Aborted) return ConnectError.from(reason);
  if (reason instanceof URIError) {
    return new ConnectError(
      "the request is malformed; the reason cannot be told, as it quotes a lone UTF-16 surrogate",
      Code.InvalidArgument,
    );
  }
  logger.error(`handler for ${path} failed:`, reason);
  return new ConnectError("internal error", Code.Internal);
}
