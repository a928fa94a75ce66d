import { Code, ConnectError } from "@connectrpc/connect";
import { status as GrpcStatus, type StatusObject } from "@grpc/grpc-js";
import { headersToMetadata } from "../encoding/grpc-headers.js";
import { wellFormed } from "../store/well-formed-text.js";

/** True when `headers` has at least one entry. */
export function hasHeaders(headers: Headers): boolean {
  for (const _ of headers.keys()) return true;
  return false;
}

/**
 * The gRPC status for an error thrown by an implementation. Connect codes and gRPC codes share their numbers. Any
 * other error becomes INTERNAL "internal error", so no message or stack reaches the client.
 */
export function toGrpcStatus(error: unknown, trailer: Headers): StatusObject {
  if (error instanceof ConnectError) {
    const metadata = headersToMetadata(trailer, error.metadata);
    // grpc-js percent-encodes the message with encodeURI, which throws on a lone surrogate.
    return { code: error.code as number as GrpcStatus, details: wellFormed(error.rawMessage), metadata };
  }
  return { code: GrpcStatus.INTERNAL, details: "internal error", metadata: headersToMetadata(trailer) };
}

/** The ConnectError a signal was aborted with, or CANCELED when the reason is something else. */
export function abortError(signal: AbortSignal): ConnectError {
  const reason: unknown = signal.reason;
  if (reason instanceof ConnectError) return reason;
  return new ConnectError("operation was aborted", Code.Canceled, undefined, undefined, reason);
}
