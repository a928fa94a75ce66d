import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";

/**
 * A connect-es service implementation together with its descriptor. The server serves every registration on both
 * stacks: connect-node (Connect, gRPC-Web, JSON over HTTP/1.1) and grpc-js (native gRPC over HTTP/2).
 */
export interface ServiceRegistration {
  readonly service: DescService;
  readonly impl: Partial<ServiceImpl<DescService>>;
}

/** Pairs a service descriptor with its implementation, keeping the implementation type-checked against it. */
export function serviceRegistration<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): ServiceRegistration {
  return { service, impl: impl as Partial<ServiceImpl<DescService>> };
}

/** Registers every service on a connect router (the `routes` function of `connectNodeAdapter`). */
export function connectRoutes(registrations: readonly ServiceRegistration[]): (router: ConnectRouter) => void {
  return (router) => {
    for (const { service, impl } of registrations) router.service(service, impl);
  };
}
