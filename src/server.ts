/**
 * The store server (`agl/server`), for whoever serves a store to runners, trainers and agents in other processes or
 * languages: one port for gRPC, Connect, gRPC-Web and JSON, with health checking, reflection, an optional bearer
 * token and TLS; and the OTLP/HTTP trace ingest that `agl serve` installs as its `fallback`.
 *
 * @example
 * ```ts
 * import { createMemoryBackend, createStore } from "agl/store";
 * import { createOtlpTracesHandler, startStoreServer } from "agl/server";
 * const store = createStore({ backend: createMemoryBackend() });
 * const server = await startStoreServer({ store, port: 4747, fallback: createOtlpTracesHandler({ store }) });
 * ```
 * @module
 */
export { startStoreServer } from "./server/store-server.js";
export type { StoreServer, StoreServerOptions } from "./server/store-server.js";
export type { ServerLogger } from "./server/error-logging.js";

/** `POST /v1/traces`: spans from any OpenTelemetry OTLP/HTTP exporter (protobuf or JSON), stored with their attempts. */
export { createOtlpTracesHandler } from "./otlp/otlp-route.js";
export type { OtlpTracesHandlerOptions } from "./otlp/otlp-route.js";

/** The dashboard: its built files at `/` (GET and HEAD), index.html for client routes, a strict content security policy. */
export { createUiHandler } from "./server/ui-handler.js";
export type { UiHandlerOptions } from "./server/ui-handler.js";
