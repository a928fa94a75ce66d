import type { DescMethod, Message } from "@bufbuild/protobuf";
import { encodeMessage } from "../encoding/generated-encoder.js";
import { Code, ConnectError, createServiceImplSpec, type Interceptor, type MethodImplSpec } from "@connectrpc/connect";
import type * as grpc from "@grpc/grpc-js";
import { createCallContext, first, type CallContext, once, parseRequest, readRequests, type RequestDecoder } from "./grpc-call.js";
import { headersToMetadata } from "../encoding/grpc-headers.js";
import { abortError, hasHeaders, toGrpcStatus } from "./grpc-metadata.js";
import { writeStream } from "./grpc-stream-writer.js";
import { invokeImplementation } from "./invoke-implementation.js";
import type { ServiceRegistration } from "./service-registration.js";

/** Options of {@link addConnectService}. */
export interface GrpcServiceAdapterOptions {
  /** Connect interceptors, applied as connect-node applies them (the first is the outermost). */
  interceptors?: readonly Interceptor[];
  /** Aborting it aborts the signal of every call in progress (graceful shutdown). */
  shutdownSignal?: AbortSignal;
  /** Larger response messages fail with RESOURCE_EXHAUSTED. Default: 16 MiB. */
  maxSendMessageBytes?: number;
  /** Gets any non-ConnectError that reaches the adapter (interceptors normally turn them into ConnectErrors). */
  onError?: (error: unknown, method: DescMethod) => void;
  /** Decodes requests in place of `decodeMessage` (the store keeps spans' bytes to store them as is). */
  decodeRequest?: RequestDecoder;
}

type Bytes = Uint8Array;
const asBytes = (bytes: Buffer): Bytes => bytes;
const asBuffer = (bytes: Bytes): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * Serves a connect-es service implementation on a grpc-js server: one handler per method, at
 * `/${service.typeName}/${method.name}`, with the protobuf-es binary format. The implementation gets a connect
 * `HandlerContext` (signal, deadline, request headers from metadata, response headers and trailers) and runs
 * through the same interceptors, so one implementation object backs both stacks. Unimplemented methods answer
 * UNIMPLEMENTED.
 */
export function addConnectService(server: grpc.Server, registration: ServiceRegistration, options: GrpcServiceAdapterOptions = {}): void {
  const { service } = registration;
  const spec = createServiceImplSpec(service, registration.impl);
  const definition: Record<string, grpc.MethodDefinition<Bytes, Bytes>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const methodSpec = spec.methods[method.localName];
    if (methodSpec === undefined) continue;
    const kind = method.methodKind;
    definition[method.name] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: kind === "client_streaming" || kind === "bidi_streaming",
      responseStream: kind === "server_streaming" || kind === "bidi_streaming",
      // Bytes pass through grpc-js untouched: decoding and size checks happen here, with proper status codes.
      requestSerialize: asBuffer,
      requestDeserialize: asBytes,
      responseSerialize: asBuffer,
      responseDeserialize: asBytes,
      originalName: method.localName,
    };
    implementation[method.name] = createHandler(methodSpec, options);
  }
  server.addService(definition, implementation);
}

function createHandler(spec: MethodImplSpec, options: GrpcServiceAdapterOptions): grpc.UntypedHandleCall {
  const { method } = spec;
  const interceptors = options.interceptors ?? [];
  const maxBytes = options.maxSendMessageBytes ?? 16 * 1024 * 1024;
  const decode = (bytes: Uint8Array) => parseRequest(method.input, bytes, options.decodeRequest);
  const serialize = (message: Message) => {
    const bytes = encodeMessage(method.output, message);
    if (bytes.byteLength > maxBytes) {
      const text = `message size ${bytes.byteLength} is larger than configured writeMaxBytes ${maxBytes}`;
      throw new ConnectError(text, Code.ResourceExhausted);
    }
    return bytes;
  };
  // After an abort (cancel, deadline, shutdown) its reason is the status; errors it caused are no faults.
  const statusOf = (error: unknown, ctx: CallContext) => {
    if (!(error instanceof ConnectError) && !ctx.signal.aborted) options.onError?.(error, method);
    return toGrpcStatus(ctx.signal.aborted ? abortError(ctx.signal) : error, ctx.responseTrailer);
  };

  if (method.methodKind === "unary" || method.methodKind === "client_streaming") {
    type Call = grpc.ServerUnaryCall<Bytes, Bytes> | grpc.ServerReadableStream<Bytes, Bytes>;
    return (async (call: Call, callback: grpc.sendUnaryData<Bytes>) => {
      const ctx = createCallContext(call, spec, options.shutdownSignal);
      try {
        const input = "request" in call ? decode(call.request) : readRequests(call, decode, ctx.signal);
        const output = await invokeImplementation(spec, ctx, input, interceptors);
        const bytes = serialize(Symbol.asyncIterator in output ? await first(output) : output);
        if (hasHeaders(ctx.responseHeader)) call.sendMetadata(headersToMetadata(ctx.responseHeader));
        callback(null, bytes, headersToMetadata(ctx.responseTrailer));
      } catch (error) {
        callback(statusOf(error, ctx));
      } finally {
        ctx.end();
      }
    }) as grpc.UntypedHandleCall;
  }

  type Call = grpc.ServerWritableStream<Bytes, Bytes> | grpc.ServerDuplexStream<Bytes, Bytes>;
  return (async (call: Call) => {
    const ctx = createCallContext(call, spec, options.shutdownSignal);
    try {
      const input = "request" in call ? once(decode(call.request)) : readRequests(call, decode, ctx.signal);
      const output = (await invokeImplementation(spec, ctx, input, interceptors)) as AsyncIterable<Message>;
      await writeStream(call, output, serialize, ctx);
      call.end(headersToMetadata(ctx.responseTrailer));
    } catch (error) {
      // grpc-js turns an 'error' event on a server stream into the call's final status.
      call.emit("error", statusOf(error, ctx));
    } finally {
      ctx.end();
    }
  }) as grpc.UntypedHandleCall;
}
