/**
 * The store server: one port for gRPC (grpc-js), Connect, gRPC-Web and JSON (connect-node), with health checking,
 * server reflection, an optional bearer token, TLS and graceful shutdown.
 */
export { startStoreServer, type StoreServer, type StoreServerOptions } from "./store-server.js";
export { serviceRegistration, connectRoutes, type ServiceRegistration } from "./service-registration.js";
export { createStoreServices, callOptionsOf } from "./store-services.js";
export { addConnectService, type GrpcServiceAdapterOptions } from "./grpc-adapter.js";
export { createHealthService, ServingStatus, type HealthService, type HealthServiceOptions } from "./health-service.js";
export { createReflectionServices, type ReflectionServiceOptions } from "./reflection-service.js";
export { bearerTokenProblem, createBearerAuthInterceptor, credentialsOf, OPEN_SERVICES, type BearerAuthOptions } from "../core/auth.js";
export { createErrorLoggingInterceptor, sanitizeError, consoleLogger, type ServerLogger } from "./error-logging.js";
export {
  createFrontServer,
  routeByPreface,
  HTTP2_PREFACE,
  type FrontServer,
  type FrontServerOptions,
  type ConnectionTargets,
} from "./front-server.js";
export { createHttpServer, type HttpFallback, type HttpServerOptions } from "./http-handler.js";
export { createUiHandler, UI_CONTENT_SECURITY_POLICY, type UiHandlerOptions } from "./ui-handler.js";
