import { fromBinary, type DescMessage, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import type * as grpc from "@grpc/grpc-js";
import type { Readable } from "node:stream";
import { abortError, metadataToHeaders } from "./grpc-metadata.js";

/** Any grpc-js server call, seen as raw bytes in and out. */
export type GrpcCall =
  | grpc.ServerUnaryCall<Uint8Array, Uint8Array>
  | grpc.ServerReadableStream<Uint8Array, Uint8Array>
  | grpc.ServerWritableStream<Uint8Array, Uint8Array>
  | grpc.ServerDuplexStream<Uint8Array, Uint8Array>;

/** A handler context the adapter ends with `abort()` when the call is over. */
export type CallContext = HandlerContext & { abort(reason?: unknown): void };

/**
 * A connect `HandlerContext` for a grpc-js call: its signal aborts when the client cancels, at the deadline
 * (`grpc-timeout`), when `shutdownSignal` aborts, and when the caller calls `abort()` at the end of the call.
 */
export function createCallContext(
  call: GrpcCall,
  spec: MethodImplSpec,
  shutdownSignal: AbortSignal | undefined,
): CallContext {
  const events = call as NodeJS.EventEmitter;
  const cancelled = new AbortController();
  const onCancel = () => cancelled.abort(new ConnectError("the client cancelled the call", Code.Canceled));
  if (call.cancelled) onCancel();
  else events.once("cancelled", onCancel);
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const ctx = createHandlerContext({
    service: spec.method.parent,
    method: spec.method,
    protocolName: "grpc",
    requestMethod: "POST",
    url: `http://${call.getHost()}${call.getPath()}`,
    timeoutMs: Number.isFinite(deadlineMs) ? deadlineMs - Date.now() : undefined,
    shutdownSignal,
    requestSignal: cancelled.signal,
    requestHeader: metadataToHeaders(call.metadata),
  });
  ctx.signal.addEventListener("abort", () => events.off("cancelled", onCancel), { once: true });
  return ctx;
}

/** Decodes a request; bytes that are not a valid message are the client's fault: INVALID_ARGUMENT. */
export function parseRequest(schema: DescMessage, bytes: Uint8Array): Message {
  try {
    return fromBinary(schema, bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConnectError(`cannot decode ${schema.typeName}: ${reason}`, Code.InvalidArgument);
  }
}

/** The decoded request messages of a client-streaming or bidi call. */
export async function* readRequests(call: Readable, schema: DescMessage, signal: AbortSignal): AsyncIterable<Message> {
  try {
    // A plain for-await would destroy the call (its write side too) once the client half-closes.
    for await (const chunk of call.iterator({ destroyOnReturn: false })) yield parseRequest(schema, chunk as Uint8Array);
  } catch (error) {
    // A cancelled call destroys the request stream; report the cancellation rather than the stream error.
    throw signal.aborted ? abortError(signal) : error;
  }
}

/** A stream of one message. */
export async function* once(message: Message): AsyncIterable<Message> {
  yield message;
}

/** The single message of a client-streaming method's response stream. */
export async function first(messages: AsyncIterable<Message>): Promise<Message> {
  for await (const message of messages) return message;
  throw new ConnectError("protocol error: missing output message", Code.Internal);
}
