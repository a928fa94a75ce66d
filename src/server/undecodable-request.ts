import { Code, ConnectError } from "@connectrpc/connect";
import {
  createAsyncIterable,
  encodeEnvelope,
  readAllBytes,
  type UniversalHandler,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";

// How connect-es 2.1 words, with code INTERNAL, a request message it cannot decode from protobuf bytes, and a request
// envelope flagged compressed without a compression to undo.
const parsePrefix = "parse binary: ";
const compressedEnvelope = "received compressed envelope, but do not know how to decompress";

/**
 * A request that does not decode is the client's fault: INVALID_ARGUMENT, as the native gRPC side answers for
 * undecodable messages (grpc-call.ts). connect-es reports such requests as INTERNAL, which would say the server
 * failed (and hides the reason). Returns the error with its proper code, or undefined for any other error.
 */
export function undecodableRequestError(error: unknown): ConnectError | undefined {
  if (!(error instanceof ConnectError) || error.code !== Code.Internal) return undefined;
  if (error.rawMessage.startsWith(parsePrefix)) {
    return new ConnectError(`cannot decode the request message: ${error.rawMessage.slice(parsePrefix.length)}`, Code.InvalidArgument);
  }
  if (error.rawMessage === compressedEnvelope) {
    return new ConnectError("a request message is flagged compressed, but the request names no compression", Code.InvalidArgument);
  }
  return undefined;
}

/**
 * Wraps a connect-es handler so that a unary request whose body does not decode is answered INVALID_ARGUMENT on
 * every HTTP/1.1 protocol. connect-es decodes it before any interceptor runs and answers INTERNAL: in a JSON error body
 * (Connect), in the trailers (gRPC) or in the trailer frame (gRPC-Web). Streaming calls decode inside the
 * interceptors, where the error-logging interceptor corrects the code.
 */
export function withUndecodableRequestsAsInvalid(handler: UniversalHandler): UniversalHandler {
  const wrapped = async (...args: Parameters<UniversalHandler>): Promise<UniversalServerResponse> => {
    const response = await handler(...args);
    const type = response.header?.get("content-type") ?? "";
    if (response.status === 500 && type.startsWith("application/json")) return fixConnectError(response);
    if (isBody(response.body) && type.startsWith("application/grpc-web")) return { ...response, body: fixGrpcWebTrailer(response.body) };
    if (isBody(response.body) && type.startsWith("application/grpc") && response.trailer) {
      return { ...response, body: fixGrpcTrailer(response.body, response.trailer) };
    }
    return response;
  };
  return Object.assign(wrapped, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    allowedMethods: handler.allowedMethods,
    supportedContentType: handler.supportedContentType,
  });
}

const isBody = (body: unknown): body is AsyncIterable<Uint8Array> =>
  typeof body === "object" && body !== null && Symbol.asyncIterator in body;

/** A Connect unary error answer (HTTP 500, a JSON body), with its code corrected. */
async function fixConnectError(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (response.header?.has("content-encoding") || response.body === undefined) return response;
  const bytes =
    response.body instanceof Uint8Array ? response.body : await readAllBytes(response.body as AsyncIterable<Uint8Array>, 1 << 20);
  let corrected: ConnectError | undefined;
  try {
    corrected = undecodableRequestError(errorFromJsonBytes(bytes, undefined, new ConnectError("", Code.Internal)));
  } catch {
    // Not a Connect error body: leave the answer as it is.
  }
  if (corrected === undefined) return { ...response, body: createAsyncIterable([bytes]) };
  const body = errorToJsonBytes(corrected, {});
  const header = new Headers(response.header);
  header.set("content-length", String(body.byteLength));
  return { ...response, status: codeToHttpStatus(corrected.code), header, body: createAsyncIterable([body]) };
}

/** gRPC-Web sends its trailers as the body's last envelope (flag 0x80, one chunk): corrected there. */
async function* fixGrpcWebTrailer(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    const isTrailer =
      chunk.byteLength >= 5 &&
      chunk[0] === trailerFlag &&
      new DataView(chunk.buffer, chunk.byteOffset).getUint32(1) === chunk.byteLength - 5;
    const trailer = isTrailer ? trailerParse(chunk.subarray(5)) : undefined;
    const corrected = trailer && undecodableRequestError(findTrailerError(trailer));
    if (!trailer || !corrected) {
      yield chunk;
      continue;
    }
    yield encodeEnvelope(trailerFlag, trailerSerialize(setTrailerStatus(trailer, corrected)));
  }
}

/** gRPC over HTTP/1.1 sends its trailers after the body: corrected once the body has ended, before they are written. */
async function* fixGrpcTrailer(body: AsyncIterable<Uint8Array>, trailer: Headers): AsyncIterable<Uint8Array> {
  yield* body;
  const corrected = undecodableRequestError(findTrailerError(trailer));
  if (corrected) setTrailerStatus(trailer, corrected);
}
