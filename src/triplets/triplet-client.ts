import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcJsTransport, grpcChannelCredentials } from "../client/grpc-js-transport.js";
import type { ClientTls } from "../core/tls.js";
import { TripletService } from "../gen/agl/v1/triplets_pb.js";

/** Options of {@link createTripletClient}. */
export interface TripletClientOptions {
  /** `http://host:port` or `https://host:port` of the store server (default `http://127.0.0.1:4747`). */
  baseUrl?: string;
  /** Bearer token; defaults to the AGL_TOKEN environment variable. */
  token?: string;
  /** For https: the CA to verify the server against (default: the system's), and a client certificate. */
  tls?: ClientTls;
}

/** A `TripletService` client over gRPC, plus `close()`. */
export type TripletClient = Client<typeof TripletService> & { close(): void };

/**
 * Creates a `TripletService` client: `for await (const m of client.streamTriplets({ follow: true })) …`. Pass the
 * last message's `cursor` to resume after a disconnect.
 */
export function createTripletClient(options: TripletClientOptions = {}): TripletClient {
  const url = new URL(options.baseUrl ?? "http://127.0.0.1:4747");
  const inner = createGrpcJsTransport({
    address: url.host,
    credentials: grpcChannelCredentials(url, options.tls),
  });
  const token = options.token ?? process.env.AGL_TOKEN;
  const withToken = (header: ConstructorParameters<typeof Headers>[0]) => {
    const headers = new Headers(header);
    if (token && !headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
    return headers;
  };
  const transport: Transport = {
    unary: (method, signal, timeoutMs, header, input, ctx) => inner.unary(method, signal, timeoutMs, withToken(header), input, ctx),
    stream: (method, signal, timeoutMs, header, input, ctx) => inner.stream(method, signal, timeoutMs, withToken(header), input, ctx),
  };
  return { ...createClient(TripletService, transport), close: () => inner.close() };
}
