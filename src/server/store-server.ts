import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import type { StoreApi } from "../store/store-api.js";
import { createBearerAuthInterceptor, credentialsOf } from "../core/auth.js";
import type { Credentials } from "../core/credentials.js";
import { consoleLogger, createErrorLoggingInterceptor, type ServerLogger } from "./error-logging.js";
import type { ServerTls } from "../core/tls.js";
import { createFrontServer } from "./front-server.js";
import { addConnectService } from "./grpc-adapter.js";
import { createHealthService, ServingStatus } from "./health-service.js";
import { createHttpServer, type HttpFallback } from "./http-handler.js";
import { createReflectionServices } from "./reflection-service.js";
import type { ServiceRegistration } from "./service-registration.js";
import { createStoreServices } from "./store-services.js";
import { createCallStreamService } from "./call-stream.js";
import { createTripletService } from "./triplet-service.js";
import type { StreamTripletsOptions } from "../triplets/stream-triplets.js";
import type { Store } from "../store/store.js";
import type { Span } from "../gen/agl/v1/types_pb.js";
import { trackHttpConnections } from "./http-connections.js";
import { useNodeTextEncoding } from "../encoding/node-text-encoding.js";
import { decodeKeepingSpans } from "../store/span-wire.js";

/** Options of {@link startStoreServer}. */
export interface StoreServerOptions {
  /** The store the RPCs delegate to. The server never closes it. */
  store: StoreApi;
  /** Default: 127.0.0.1. */
  host?: string;
  /** Default: 4747; 0 picks a free port. */
  port?: number;
  /** When set, every LightningStore, ResourceService and TripletService call needs `authorization: Bearer <token>`. */
  token?: string;
  /** Scoped tokens instead of `token` (a single token is `admin`): each RPC needs the scope `RPC_SCOPES` gives it. */
  credentials?: Credentials;
  /** PEM certificate chain and private key: serve TLS instead of plaintext; with `ca`, mutual TLS. */
  tls?: ServerTls;
  /** Largest request or response message, on both stacks. Default: 16 MiB. */
  maxMessageBytes?: number;
  /** Unexpected errors go here. Default: stderr with a timestamp. */
  logger?: ServerLogger;
  /** How long `close()` lets calls in progress finish before cutting connections. Default: 5 s. */
  shutdownGraceMs?: number;
  /** How the `TripletService` (always served: trainers read triplets, never spans) polls and pages the store. */
  triplets?: StreamTripletsOptions;
  /** Further connect-style services, served on both stacks and behind the token like the store services. */
  extraServices?: readonly ServiceRegistration[];
  /** Plain HTTP/1.1 requests no RPC route matches (OTLP `/v1/traces`, the LLM proxy); default: 404. */
  fallback?: HttpFallback;
  /** Cap on concurrent HTTP/2 streams per gRPC connection. Default: grpc-js's (unlimited). */
  maxConcurrentStreams?: number;
  /**
   * Serve `CallStream` (`proto/agl/v1/calls.proto`): agl's clients then send their unary calls as messages of one
   * stream, which costs both sides a fraction of a call's CPU. Default true; false leaves clients to plain calls.
   */
  callStream?: boolean;
}

/** A running store server. */
export interface StoreServer {
  /** `http://host:port`, or `https://` with TLS. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Stops accepting, reports NOT_SERVING, ends waits, lets calls finish (up to the grace period), then cuts off. */
  close(): Promise<void>;
}

/**
 * Serves `store` on one port: native gRPC (grpc-js) for HTTP/2 connections, and Connect, gRPC-Web and JSON
 * (connect-node) for HTTP/1.1 ones: `LightningStore`, `ResourceService` and `TripletService` (triplets built from the
 * store's spans by the TypeScript adapter), with `grpc.health.v1.Health` on both and server reflection on gRPC.
 */
export async function startStoreServer(options: StoreServerOptions): Promise<StoreServer> {
  useNodeTextEncoding();
  const host = options.host ?? "127.0.0.1";
  const maxMessageBytes = options.maxMessageBytes ?? 16 * 1024 * 1024;
  const logger = options.logger ?? consoleLogger;
  const shutdown = new AbortController();

  const services = [
    ...createStoreServices(options.store),
    createTripletService({ ...inStoreProcess(options.store), ...options.triplets, store: options.store }),
    ...(options.extraServices ?? []),
  ];
  const credentials = credentialsOf(options);
  const interceptors = [
    createErrorLoggingInterceptor(logger),
    ...(credentials === undefined ? [] : [createBearerAuthInterceptor({ credentials })]),
  ];
  // Spans sent over gRPC (plain calls and CallStream alike) keep the bytes they came in: the SQL backends store those,
  // the memory backend decodes them only when they are read (src/store/span-wire.ts).
  if (options.callStream !== false) {
    services.push(createCallStreamService({ services: [...services], interceptors, maxMessageBytes, decodeRequest: decodeKeepingSpans }));
  }
  const health = createHealthService({ services: services.map((s) => s.service.typeName) });
  const served = [...services, health.registration];
  const reflection = createReflectionServices({ services: served.map((s) => s.service) });

  const grpcServer = new grpc.Server({
    "grpc.max_receive_message_length": maxMessageBytes,
    // The adapter enforces the limit on responses itself; grpc-js only adds the 5-byte frame header.
    "grpc.max_send_message_length": maxMessageBytes + 5,
    ...(options.maxConcurrentStreams === undefined ? {} : { "grpc.max_concurrent_streams": options.maxConcurrentStreams }),
  });
  const adapterOptions = {
    interceptors,
    shutdownSignal: shutdown.signal,
    maxSendMessageBytes: maxMessageBytes,
    onError: (error: unknown, method: DescMethod) => logger.error(`unexpected error in /${method.parent.typeName}/${method.name}:`, error),
    decodeRequest: decodeKeepingSpans,
  };
  for (const registration of [...served, ...reflection]) addConnectService(grpcServer, registration, adapterOptions);
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());

  const httpServer = createHttpServer({
    services: served,
    interceptors,
    maxMessageBytes,
    shutdownSignal: shutdown.signal,
    isServing: () => health.status("") === ServingStatus.SERVING,
    logger,
    ...(options.fallback === undefined ? {} : { fallback: options.fallback }),
  });
  const http1 = trackHttpConnections(httpServer);

  const front = createFrontServer({
    targets: { http2: (socket) => injector.injectConnection(socket), http1: (socket) => http1.accept(socket) },
    ...(options.tls === undefined ? {} : { tls: options.tls }),
  });
  let port: number;
  try {
    port = await front.listen(options.port ?? 4747, host);
  } catch (error) {
    grpcServer.forceShutdown();
    httpServer.close();
    throw error;
  }
  front.server.on("error", (error) => logger.error("server socket error:", error));

  let closing: Promise<void> | undefined;
  const close = async () => {
    health.shutdown();
    const allClosed = new Promise<void>((resolve) => front.server.close(() => resolve()));
    // Lets Watch streams deliver NOT_SERVING before their signal ends them.
    await new Promise((resolve) => setImmediate(resolve));
    shutdown.abort(new ConnectError("the server is shutting down", Code.Unavailable));
    const grpcDone = new Promise<void>((resolve) => grpcServer.tryShutdown(() => resolve()));
    http1.closeIdle();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, options.shutdownGraceMs ?? 5_000)));
    await Promise.race([Promise.all([allClosed, grpcDone]), grace]);
    clearTimeout(timer);
    grpcServer.forceShutdown();
    front.destroyConnections();
    await allClosed;
  };
  const scheme = options.tls === undefined ? "http" : "https";
  return {
    url: `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`,
    host,
    port,
    close: () => (closing ??= close()),
  };
}

/**
 * What triplet streams use of a store in this process (`createStore`'s): its committed events, so following streams
 * read on events; its backend's kept spans; and one read for the spans of several attempts.
 */
function inStoreProcess(store: StoreApi): Pick<StreamTripletsOptions, "events" | "keepSpans" | "spansOf"> {
  const backend = (store as Partial<Store>).backend;
  if (!backend) return {};
  const keepSpans = backend.keepSpans?.bind(backend);
  return {
    events: (listener) => backend.subscribe(listener),
    ...(keepSpans ? { keepSpans } : {}),
    spansOf: (attempts) =>
      backend.transaction(
        async (tx) => {
          const lists: Span[][] = [];
          for (const { rolloutId, attemptId } of attempts) {
            lists.push((await tx.querySpans({ rolloutId, attemptId, any: false }, allInOrder)).items);
          }
          return lists;
        },
        { readOnly: true },
      ),
  };
}

/** Every span, in the order `QuerySpans` gives them by default. */
const allInOrder = { descending: false, limit: -1, offset: 0 };
