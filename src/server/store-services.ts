import type { DescMessage, DescService } from "@bufbuild/protobuf";
import type { CallOptions, HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ResourceService } from "../gen/agl/v1/resources_pb.js";
import { LightningStore } from "../gen/agl/v1/store_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { vouchWellFormed, withWellFormedText } from "../store/well-formed-text.js";
import { mapAsyncIterable } from "../core/mapped-iterable.js";
import { serviceRegistration, type ServiceRegistration } from "./service-registration.js";

/**
 * The `LightningStore` and `ResourceService` implementations of a server: each RPC delegates to the same method of
 * `store`, passing the call's signal and remaining deadline. Methods `store` lacks answer `UNIMPLEMENTED`.
 */
export function createStoreServices(store: StoreApi): ServiceRegistration[] {
  return [
    serviceRegistration(LightningStore, delegate(LightningStore, store)),
    serviceRegistration(ResourceService, delegate(ResourceService, store)),
  ];
}

/** Call options that carry a handler's cancellation and deadline into the store. */
export function callOptionsOf(ctx: HandlerContext): CallOptions {
  const timeoutMs = ctx.timeoutMs();
  // ctx.signal also aborts when the RPC completes; by then the store call has settled, so passing it is harmless.
  return timeoutMs === undefined ? { signal: ctx.signal } : { signal: ctx.signal, timeoutMs };
}

/**
 * The request with its text well-formed, vouched for so the store does not walk it again. Only JSON can carry a lone
 * surrogate (`"\ud800"`); a request decoded from protobuf binary went through UTF-8 and cannot.
 */
function wellFormedRequest(desc: DescMessage, request: object, ctx: HandlerContext): object {
  const json = /json/i.test(ctx.requestHeader.get("content-type") ?? "");
  return vouchWellFormed(json ? withWellFormedText(desc, request) : request);
}

/** {@link wellFormedRequest} of each message of a request stream. */
function wellFormedRequests(desc: DescMessage, requests: AsyncIterable<object>, ctx: HandlerContext): AsyncIterable<object> {
  return mapAsyncIterable(requests, (request) => wellFormedRequest(desc, request, ctx));
}

type AnyMethod = (request: unknown, options: CallOptions) => unknown;

function delegate<S extends DescService>(service: S, client: object): Partial<ServiceImpl<S>> {
  const impl: Record<string, (request: unknown, ctx: HandlerContext) => unknown> = {};
  for (const method of service.methods) {
    const fn = (client as Record<string, unknown>)[method.localName];
    if (typeof fn !== "function") continue;
    // Unary methods return a promise and streaming ones an AsyncIterable: both are valid handler results.
    const streamedInput = method.methodKind === "bidi_streaming" || method.methodKind === "client_streaming";
    impl[method.localName] = (request, ctx) =>
      (fn as AnyMethod).call(
        client,
        streamedInput
          ? wellFormedRequests(method.input, request as AsyncIterable<object>, ctx)
          : wellFormedRequest(method.input, request as object, ctx),
        callOptionsOf(ctx),
      );
  }
  return impl as Partial<ServiceImpl<S>>;
}
