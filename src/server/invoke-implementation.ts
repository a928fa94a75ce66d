import { create, isMessage, type DescMessage, type Message, type MessageInitShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type StreamRequest,
  type StreamResponse,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { mapAsyncIterable } from "../core/mapped-iterable.js";

type AnyFn = (req: UnaryRequest | StreamRequest) => Promise<UnaryResponse | StreamResponse>;

/**
 * Runs one call of a connect-es method implementation outside connect's router, through the given interceptors,
 * exactly as connect-node does: the first interceptor is the outermost, the implementation sees the request header
 * and signal an interceptor passes on, and response headers and trailers end up in `ctx`.
 *
 * Unary methods resolve to the single output message; streaming methods to an AsyncIterable of output messages.
 */
export async function invokeImplementation(
  spec: MethodImplSpec,
  ctx: HandlerContext,
  input: AsyncIterable<Message> | Message,
  interceptors: readonly Interceptor[],
): Promise<Message | AsyncIterable<Message>> {
  const next = [...interceptors].reverse().reduce<AnyFn>(
    (n, i) => i(n) as AnyFn,
    (req) => call(spec, ctx, req),
  );
  const common = {
    service: spec.method.parent,
    requestMethod: ctx.requestMethod,
    url: ctx.url,
    signal: ctx.signal,
    header: ctx.requestHeader,
    contextValues: ctx.values,
  };
  const req =
    spec.kind === "unary"
      ? { ...common, stream: false as const, method: spec.method, message: input as Message }
      : { ...common, stream: true as const, method: spec.method, message: input as AsyncIterable<Message> };
  const res = await next(req);
  copyHeaders(res.header, ctx.responseHeader);
  copyHeaders(res.trailer, ctx.responseTrailer);
  return res.message;
}

async function call(spec: MethodImplSpec, ctx: HandlerContext, req: UnaryRequest | StreamRequest): Promise<UnaryResponse | StreamResponse> {
  // What an interceptor passed on (headers, signal, context values) wins over the original context.
  const merged: HandlerContext = {
    ...ctx,
    service: req.service,
    requestHeader: req.header,
    signal: req.signal,
    values: req.contextValues,
  };
  const common = { service: spec.method.parent, header: ctx.responseHeader, trailer: ctx.responseTrailer };
  const output = spec.method.output;
  switch (spec.kind) {
    case "unary": {
      const message = normalize(output, await spec.impl(req.message as Message, merged));
      return { ...common, stream: false, method: spec.method, message };
    }
    case "server_streaming": {
      const request = await single(req.message as AsyncIterable<Message>);
      return { ...common, stream: true, method: spec.method, message: normalizeAll(output, spec.impl(request, merged)) };
    }
    case "client_streaming": {
      const message = normalize(output, await spec.impl(req.message as AsyncIterable<Message>, merged));
      return { ...common, stream: true, method: spec.method, message: once(message) };
    }
    case "bidi_streaming": {
      const messages = spec.impl(req.message as AsyncIterable<Message>, merged);
      return { ...common, stream: true, method: spec.method, message: normalizeAll(output, messages) };
    }
  }
}

/** Turns an init object returned by an implementation into a message of `schema`. */
export function normalize(schema: DescMessage, value: MessageInitShape<DescMessage>): Message {
  return isMessage(value, schema) ? value : create(schema, value);
}

function normalizeAll(schema: DescMessage, values: AsyncIterable<MessageInitShape<DescMessage>>): AsyncIterable<Message> {
  return mapAsyncIterable(values, (value) => normalize(schema, value));
}

async function* once(message: Message): AsyncIterable<Message> {
  yield message;
}

async function single(messages: AsyncIterable<Message>): Promise<Message> {
  let first: Message | undefined;
  for await (const message of messages) {
    if (first !== undefined) throw new ConnectError("protocol error: received extra input message", Code.Unimplemented);
    first = message;
  }
  if (first === undefined) throw new ConnectError("protocol error: missing input message", Code.Unimplemented);
  return first;
}

function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const key of [...to.keys()]) to.delete(key);
  for (const [key, value] of from) to.set(key, value);
}
