import type { DescMessage, Message } from "@bufbuild/protobuf";
import { decodeMessage } from "../encoding/generated-decoder.js";
import { Code, ConnectError, createContextValues, type HandlerContext, type MethodImplSpec } from "@connectrpc/connect";
import type * as grpc from "@grpc/grpc-js";
import type { Readable } from "node:stream";
import { metadataToHeaders } from "../encoding/grpc-headers.js";
import { abortError } from "./grpc-metadata.js";
import { mapAsyncIterable } from "../core/mapped-iterable.js";

/** Any grpc-js server call, seen as raw bytes in and out. */
export type GrpcCall =
  | grpc.ServerUnaryCall<Uint8Array, Uint8Array>
  | grpc.ServerReadableStream<Uint8Array, Uint8Array>
  | grpc.ServerWritableStream<Uint8Array, Uint8Array>
  | grpc.ServerDuplexStream<Uint8Array, Uint8Array>;

/** A handler context the adapter ends with `end()` when the call is over. */
export type CallContext = HandlerContext & { end(): void };

/**
 * A connect `HandlerContext` for a grpc-js call: its signal aborts when the client cancels, at the deadline
 * (`grpc-timeout`), or when `shutdownSignal` aborts (with that signal's reason). Unlike connect's own context it does
 * not abort when the call completes normally: `end()` only releases its listeners. Aborting costs an exception
 * object and listener calls per RPC, a measurable share of a small call's CPU.
 */
export function createCallContext(call: GrpcCall, spec: MethodImplSpec, shutdownSignal: AbortSignal | undefined): CallContext {
  const events = call as NodeJS.EventEmitter;
  const controller = new AbortController();
  const abort = (reason: unknown) => {
    if (!controller.signal.aborted) controller.abort(reason);
  };
  const onCancel = () => abort(new ConnectError("the client cancelled the call", Code.Canceled));
  const onShutdown = () => abort(shutdownSignal?.reason);
  const stopWatchingShutdown = shutdownSignal ? watchShutdown(shutdownSignal, onShutdown) : () => {};
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
  const timer = Number.isFinite(deadlineMs)
    ? setTimeout(() => abort(new ConnectError("the deadline was exceeded", Code.DeadlineExceeded)), deadlineMs - Date.now())
    : undefined;
  if (call.cancelled) onCancel();
  else events.once("cancelled", onCancel);
  return {
    service: spec.method.parent,
    method: spec.method,
    protocolName: "grpc",
    requestMethod: "POST",
    url: `http://${call.getHost()}${call.getPath()}`,
    signal: controller.signal,
    timeoutMs: () => (Number.isFinite(deadlineMs) ? deadlineMs - Date.now() : undefined),
    requestHeader: metadataToHeaders(call.metadata),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: createContextValues(),
    end() {
      clearTimeout(timer);
      events.off("cancelled", onCancel);
      stopWatchingShutdown();
    },
  };
}

const shutdownWatchers = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `onAbort` when `signal` aborts (at once if it has). One listener per signal serves every call in flight:
 * a listener per call would trip Node's MaxListenersExceededWarning beyond ten concurrent calls.
 */
function watchShutdown(signal: AbortSignal, onAbort: () => void): () => void {
  if (signal.aborted) {
    onAbort();
    return () => {};
  }
  let watchers = shutdownWatchers.get(signal);
  if (!watchers) {
    const set = new Set<() => void>();
    watchers = set;
    shutdownWatchers.set(signal, set);
    signal.addEventListener(
      "abort",
      () => {
        for (const watcher of set) watcher();
      },
      { once: true },
    );
  }
  watchers.add(onAbort);
  const registered = watchers;
  return () => registered.delete(onAbort);
}

/** Decodes a request message of a type (by default `decodeMessage`). */
export type RequestDecoder = (schema: DescMessage, bytes: Uint8Array) => Message;

/** Decodes a request; bytes that are not a valid message are the client's fault: INVALID_ARGUMENT. */
export function parseRequest(schema: DescMessage, bytes: Uint8Array, decode: RequestDecoder = decodeMessage): Message {
  try {
    return decode(schema, bytes);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConnectError(`cannot decode ${schema.typeName}: ${reason}`, Code.InvalidArgument);
  }
}

/** The decoded request messages of a client-streaming or bidi call. */
export function readRequests(call: Readable, decode: (bytes: Uint8Array) => Message, signal: AbortSignal): AsyncIterable<Message> {
  return mapAsyncIterable(
    // The default iterator would destroy the call (its write side too) once the client half-closes.
    call.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>,
    decode,
    // A cancelled call destroys the request stream; report the cancellation rather than the stream error.
    (error) => (signal.aborted ? abortError(signal) : error),
  );
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
