import { create, type Message } from "@bufbuild/protobuf";
import { encodeMessage } from "../encoding/generated-encoder.js";
import {
  Code,
  ConnectError,
  createContextValues,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
} from "@connectrpc/connect";
import { answerConcurrently } from "../core/concurrent-answers.js";
import { DeadlineTimer, expirePast } from "../core/deadline-timer.js";
import { CallStream, type CallRequest, type CallResponse, CallResponseSchema } from "../gen/agl/v1/calls_pb.js";
import { parseRequest, type RequestDecoder } from "./grpc-call.js";
import { abortError } from "./grpc-metadata.js";
import { invokeImplementation } from "./invoke-implementation.js";
import { serviceRegistration, type ServiceRegistration } from "./service-registration.js";

/** Options of {@link createCallStreamService}. */
export interface CallStreamOptions {
  /** The services whose unary methods the stream carries. */
  services: readonly ServiceRegistration[];
  /** Run around each call, as around a unary call of its own (authorization, error logging). */
  interceptors?: readonly Interceptor[];
  /** Larger answers fail their call with RESOURCE_EXHAUSTED, as the unary call's would. */
  maxMessageBytes: number;
  /** Decodes each call's request in place of `decodeMessage`, as the gRPC adapter's `decodeRequest` does. */
  decodeRequest?: RequestDecoder;
  /** Calls of one stream in progress at once; the stream reads no further until one is answered. Default 256. */
  maxInFlight?: number;
}

// The answer carries the method's response inside a CallResponse: a few bytes more than the unary call's message.
const framingBytes = 64;

/**
 * `CallStream`: the unary methods of `services` called through messages of one stream (`proto/agl/v1/calls.proto`).
 * Each call gets its own context (its signal aborts on its deadline, its cancel message, or the stream's end) and runs
 * through the interceptors with the stream's request headers, so it is authorized as its own unary call would be.
 */
export function createCallStreamService(options: CallStreamOptions): ServiceRegistration {
  const methods = new Map<string, MethodImplSpec>();
  for (const { service, impl } of options.services) {
    const spec = createServiceImplSpec(service, impl);
    for (const method of service.methods) {
      const methodSpec = spec.methods[method.localName];
      if (method.methodKind === "unary" && methodSpec) methods.set(`${service.typeName}/${method.name}`, methodSpec);
    }
  }
  return serviceRegistration(CallStream, {
    calls: (requests, ctx) => answers(requests, ctx, methods, options),
  });
}

/** A call in flight: its signal's controller and its deadline (epoch ms; infinite: none). */
interface InFlight {
  controller: AbortController;
  deadline: number;
}

async function* answers(
  requests: AsyncIterable<CallRequest>,
  stream: HandlerContext,
  methods: ReadonlyMap<string, MethodImplSpec>,
  options: CallStreamOptions,
): AsyncIterable<CallResponse> {
  const inFlight = new Map<number, InFlight>();
  // One listener on the stream's signal for every call in flight.
  const abortAll = () => {
    for (const { controller } of inFlight.values()) controller.abort(abortError(stream.signal));
  };
  stream.signal.addEventListener("abort", abortAll, { once: true });
  // One timer for the deadlines of the calls in flight: a timer of each call's own cost ~5 % of a small call's CPU.
  const deadlines = new DeadlineTimer((now) =>
    expirePast(inFlight.values(), now, ({ controller }) =>
      controller.abort(new ConnectError("the deadline was exceeded", Code.DeadlineExceeded)),
    ),
  );

  const run = async (request: CallRequest): Promise<CallResponse | undefined> => {
    const { id } = request;
    if (request.cancel) {
      inFlight.get(id)?.controller.abort(new ConnectError("the client cancelled the call", Code.Canceled));
      return undefined;
    }
    const controller = new AbortController();
    if (stream.signal.aborted) controller.abort(abortError(stream.signal));
    const deadline = request.timeoutMs > 0 ? Date.now() + request.timeoutMs : Number.POSITIVE_INFINITY;
    const call = { controller, deadline };
    inFlight.set(id, call);
    deadlines.add(deadline);
    try {
      const spec = methods.get(request.method);
      if (!spec) throw new ConnectError(`${JSON.stringify(request.method)} is not a unary method served here`, Code.Unimplemented);
      const message = parseRequest(spec.method.input, request.request, options.decodeRequest);
      const ctx = callContext(spec, stream, controller, deadline);
      const output = (await invokeImplementation(spec, ctx, message, options.interceptors ?? [])) as Message;
      const bytes = encodeMessage(spec.method.output, output);
      if (bytes.byteLength > options.maxMessageBytes - framingBytes) {
        throw new ConnectError(`response of ${bytes.byteLength} bytes is larger than the server's message limit`, Code.ResourceExhausted);
      }
      return create(CallResponseSchema, { id, response: bytes });
    } catch (error) {
      const e = controller.signal.aborted ? ConnectError.from(controller.signal.reason) : ConnectError.from(error);
      return create(CallResponseSchema, { id, errorCode: e.code || Code.Unknown, errorMessage: e.rawMessage });
    } finally {
      if (inFlight.get(id) === call) inFlight.delete(id);
    }
  };

  try {
    yield* answerConcurrently(requests, run, options.maxInFlight ?? 256);
  } finally {
    stream.signal.removeEventListener("abort", abortAll);
    deadlines.stop();
    abortAll();
  }
}

/** The context of one call on the stream: the stream's headers, its own signal and deadline (epoch ms; infinite: none). */
function callContext(spec: MethodImplSpec, stream: HandlerContext, controller: AbortController, deadline: number): HandlerContext {
  return {
    service: spec.method.parent,
    method: spec.method,
    protocolName: stream.protocolName,
    requestMethod: stream.requestMethod,
    url: stream.url,
    signal: controller.signal,
    timeoutMs: () => (deadline === Number.POSITIVE_INFINITY ? undefined : deadline - Date.now()),
    requestHeader: stream.requestHeader,
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: createContextValues(),
  };
}
