import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { serviceRegistration, type ServiceRegistration } from "./service-registration.js";

export { ServingStatus };

/** Options of {@link createHealthService}. */
export interface HealthServiceOptions {
  /** Service names to report; "" (the whole server) is always included. */
  services: readonly string[];
}

/** The `grpc.health.v1.Health` service and the switch that drives it. */
export interface HealthService {
  readonly registration: ServiceRegistration;
  /** The status of `service`, or undefined for an unknown name. */
  status(service: string): ServingStatus | undefined;
  /** Marks every service NOT_SERVING (at shutdown); Watch streams see the change. */
  shutdown(): void;
}

/**
 * Implements `grpc.health.v1.Health` (Check, Watch, List) as a connect-style implementation, served on both stacks:
 * every known service is SERVING until `shutdown()`, then NOT_SERVING.
 */
export function createHealthService(options: HealthServiceOptions): HealthService {
  const statuses = new Map<string, ServingStatus>(["", ...options.services].map((name) => [name, ServingStatus.SERVING]));
  const listeners = new Set<() => void>();

  const changed = (signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const done = () => {
        listeners.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      if (signal.aborted) return resolve();
      listeners.add(done);
      signal.addEventListener("abort", done);
    });

  const registration = serviceRegistration(Health, {
    check(request) {
      const status = statuses.get(request.service);
      if (status === undefined) throw new ConnectError(`unknown service "${request.service}"`, Code.NotFound);
      return { status };
    },
    async *watch(request, ctx) {
      let last: ServingStatus | undefined;
      while (!ctx.signal.aborted) {
        const status = statuses.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
        if (status !== last) {
          last = status;
          yield { status };
        }
        await changed(ctx.signal);
      }
    },
    list() {
      return { statuses: Object.fromEntries([...statuses].map(([name, status]) => [name, { status }])) };
    },
  });

  return {
    registration,
    status: (service) => statuses.get(service),
    shutdown() {
      for (const name of statuses.keys()) statuses.set(name, ServingStatus.NOT_SERVING);
      for (const listener of [...listeners]) listener();
    },
  };
}
