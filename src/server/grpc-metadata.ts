import { Metadata, status as GrpcStatus, type StatusObject } from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";

/** Converts grpc-js metadata to fetch `Headers`, with binary (`-bin`) values base64-encoded as connect does. */
export function metadataToHeaders(metadata: Metadata): Headers {
  const headers = new Headers();
  for (const [key, values] of Object.entries(metadata.toJSON())) {
    for (const value of values) {
      headers.append(key, typeof value === "string" ? value : Buffer.from(value).toString("base64"));
    }
  }
  return headers;
}

/** Converts `Headers` to grpc-js metadata; values of `-bin` keys are decoded from base64. Invalid entries are dropped. */
export function headersToMetadata(...sources: Headers[]): Metadata {
  const metadata = new Metadata();
  for (const headers of sources) {
    headers.forEach((value, key) => {
      try {
        if (key.endsWith("-bin")) {
          for (const part of value.split(",")) metadata.add(key, Buffer.from(part.trim(), "base64"));
        } else {
          metadata.add(key, value);
        }
      } catch {
        // grpc-js rejects keys that are not legal metadata keys; such a header cannot be sent over gRPC.
      }
    });
  }
  return metadata;
}

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
    return { code: error.code as number as GrpcStatus, details: error.rawMessage, metadata };
  }
  return { code: GrpcStatus.INTERNAL, details: "internal error", metadata: headersToMetadata(trailer) };
}

/** The ConnectError a signal was aborted with, or CANCELED when the reason is something else. */
export function abortError(signal: AbortSignal): ConnectError {
  const reason: unknown = signal.reason;
  if (reason instanceof ConnectError) return reason;
  return new ConnectError("operation was aborted", Code.Canceled, undefined, undefined, reason);
}
