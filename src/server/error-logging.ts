import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { undecodableRequestError } from "./undecodable-request.js";
import { wellFormed } from "../store/well-formed-text.js";
import { mapAsyncIterable } from "../core/mapped-iterable.js";
import type { Logger } from "../core/logger.js";

/** Where the server reports what clients must not see: the part of the {@link Logger} it uses, so any Logger fits. */
export type ServerLogger = Pick<Logger, "error">;

/** Writes to stderr with an ISO timestamp. */
export const consoleLogger: ServerLogger = {
  error(message, error) {
    const line = `${new Date().toISOString()} ${message}`;
    if (error === undefined) console.error(line);
    else console.error(line, error);
  },
};

/**
 * An interceptor (for connect-node and the grpc-js adapter alike) that logs unexpected errors — anything but a
 * ConnectError, and ConnectErrors with code INTERNAL or UNKNOWN — with the method name, and replaces them by
 * INTERNAL "internal error" so no message or stack reaches the client. Errors of streams are handled the same way.
 */
export function createErrorLoggingInterceptor(logger: ServerLogger = consoleLogger): Interceptor {
  return (next) => async (req) => {
    const name = `/${req.service.typeName}/${req.method.name}`;
    try {
      const res = await next(req);
      return res.stream ? { ...res, message: guard(res.message, name, req.signal, logger) } : res;
    } catch (error) {
      throw sanitizeError(error, name, req.signal, logger);
    }
  };
}

/**
 * The error a client may see for `error`, logging it when it is unexpected. Errors that follow the call's abort
 * (client cancel, deadline, shutdown) are the abort's consequence, not a fault, and are not logged.
 */
export function sanitizeError(error: unknown, method: string, signal: AbortSignal, logger: ServerLogger): ConnectError {
  const sanitized = classify(error, method, signal, logger);
  const message = wellFormed(sanitized.rawMessage);
  // gRPC trailers carry the message percent-encoded, which fails on a lone surrogate (quoted from a JSON request).
  if (message === sanitized.rawMessage) return sanitized;
  return new ConnectError(message, sanitized.code, sanitized.metadata, undefined, sanitized.cause);
}

function classify(error: unknown, method: string, signal: AbortSignal, logger: ServerLogger): ConnectError {
  // The abort's reason (deadline, client cancel, UNAVAILABLE at shutdown) says more than what the store made of it.
  if (signal.aborted) return ConnectError.from(signal.reason, Code.Canceled);
  // A streaming call's request that does not decode reaches here as INTERNAL; it is the client's fault.
  const undecodable = undecodableRequestError(error);
  if (undecodable) return undecodable;
  if (error instanceof ConnectError && error.code !== Code.Internal && error.code !== Code.Unknown) return error;
  if (error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError")) {
    return ConnectError.from(error);
  }
  logger.error(`unexpected error in ${method}:`, error);
  return new ConnectError("internal error", Code.Internal, undefined, undefined, error);
}

function guard<T extends Message>(messages: AsyncIterable<T>, method: string, signal: AbortSignal, logger: ServerLogger): AsyncIterable<T> {
  return mapAsyncIterable(
    messages,
    (message) => message,
    (error) => sanitizeError(error, method, signal, logger),
  );
}
