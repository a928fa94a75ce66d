import type { ConnectError } from "@connectrpc/connect";
import { createAsyncIterable, encodeEnvelope, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, endStreamFlag, endStreamToJson, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

/**
 * The answer carrying `error` in the protocol the request's content type names: a trailers-only response for gRPC
 * and gRPC-Web, an end-of-stream message for a Connect stream, a JSON error body for Connect unary. For a request
 * connect-es failed to answer at all.
 */
export function errorResponse(requestContentType: string, error: ConnectError): UniversalServerResponse {
  const type = requestContentType.toLowerCase();
  if (type.startsWith("application/grpc")) {
    const base = type.startsWith("application/grpc-web") ? "application/grpc-web" : "application/grpc";
    const header = setTrailerStatus(new Headers({ "content-type": `${base}+${type.includes("+json") ? "json" : "proto"}` }), error);
    return { status: 200, header, body: createAsyncIterable([]) };
  }
  if (type.startsWith("application/connect+")) {
    const end = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), error, {})));
    const header = new Headers({
      "content-type": type.startsWith("application/connect+json") ? "application/connect+json" : "application/connect+proto",
    });
    return { status: 200, header, body: createAsyncIterable([encodeEnvelope(endStreamFlag, end)]) };
  }
  const body = errorToJsonBytes(error, {});
  const header = new Headers({ "content-type": "application/json", "content-length": String(body.byteLength) });
  return { status: codeToHttpStatus(error.code), header, body: createAsyncIterable([body]) };
}
