import { createHash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";

/** Services that stay reachable without a token, so probes and tools like grpcurl keep working. */
export const OPEN_SERVICES: readonly string[] = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

/** Options of {@link createBearerAuthInterceptor}. */
export interface BearerAuthOptions {
  /** The token clients must send as `authorization: Bearer <token>`. */
  token: string;
  /** Services (fully qualified names) that need no token. Default: {@link OPEN_SERVICES}. */
  openServices?: readonly string[];
}

/**
 * An interceptor (for connect-node and the grpc-js adapter alike) that rejects calls without the right bearer token
 * with UNAUTHENTICATED, except to the open services.
 */
export function createBearerAuthInterceptor(options: BearerAuthOptions): Interceptor {
  const open = new Set(options.openServices ?? OPEN_SERVICES);
  return (next) => async (req) => {
    if (!open.has(req.service.typeName)) checkBearerToken(req.header.get("authorization"), options.token);
    return next(req);
  };
}

/**
 * Throws UNAUTHENTICATED unless `authorization` is `Bearer <token>`. Also for plain HTTP routes (OTLP, the LLM
 * proxy) that sit beside the RPC services.
 */
export function checkBearerToken(authorization: string | null | undefined, token: string): void {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  if (match === null) {
    throw new ConnectError("missing bearer token: send the header 'authorization: Bearer <token>'", Code.Unauthenticated);
  }
  if (!sameSecret(match[1] ?? "", token)) throw new ConnectError("invalid bearer token", Code.Unauthenticated);
}

/**
 * Undefined when `authorization` is `Bearer <token>`; otherwise what is wrong, for a plain HTTP route's 401. The same
 * check as {@link checkBearerToken}, so every route of a server accepts and refuses the same headers.
 */
export function bearerTokenProblem(authorization: string | null | undefined, token: string): string | undefined {
  try {
    checkBearerToken(authorization, token);
    return undefined;
  } catch (error) {
    return ConnectError.from(error).rawMessage;
  }
}

/** Constant-time comparison; hashing first makes it independent of the lengths too. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
