import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { adminToken, type Credentials, type Scope, scopesText } from "./credentials.js";
import { RPC_SCOPES, type RpcAccess } from "./rpc-scopes.js";

/** Services that stay reachable without a token, so probes and tools like grpcurl keep working. */
export const OPEN_SERVICES: readonly string[] = [
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
];

/** Options of {@link createBearerAuthInterceptor}. */
export interface BearerAuthOptions {
  /** A single token, of scope `admin`. */
  token?: string;
  /** The accepted tokens and their scopes (instead of `token`). */
  credentials?: Credentials;
  /** Services (fully qualified names) that need no token. Default: {@link OPEN_SERVICES}. */
  openServices?: readonly string[];
  /** The scope each RPC needs. Default: {@link RPC_SCOPES}. */
  rpcScopes?: Readonly<Record<string, RpcAccess>>;
}

/** The credentials `options` describe; undefined when neither a token nor credentials are given. */
export function credentialsOf(options: { token?: string; credentials?: Credentials }): Credentials | undefined {
  return options.credentials ?? (options.token === undefined ? undefined : adminToken(options.token));
}

/**
 * An interceptor (for connect-node and the grpc-js adapter alike) that rejects calls without a known bearer token
 * with UNAUTHENTICATED, and calls the token's scope does not cover with PERMISSION_DENIED, except to the open services.
 */
export function createBearerAuthInterceptor(options: BearerAuthOptions): Interceptor {
  const credentials = credentialsOf(options);
  if (credentials === undefined) throw new Error("createBearerAuthInterceptor needs a token or credentials");
  const open = new Set(options.openServices ?? OPEN_SERVICES);
  const table = options.rpcScopes ?? RPC_SCOPES;
  return (next) => async (req) => {
    if (open.has(req.service.typeName)) return next(req);
    const name = `${req.service.typeName}/${req.method.name}`;
    const access = table[name];
    const authorization = req.header.get("authorization");
    const narrow = access?.runnerMay;
    if (narrow && !req.stream && credentials.scopeOf(authorization) === "runner") {
      if (narrow.when(req.message)) return next(req);
      const message = `${name} needs scope ${scopesText(access.scopes)}; this token has scope runner, which may call it ${narrow.what}`;
      throw new ConnectError(message, Code.PermissionDenied);
    }
    credentials.authorize(authorization, access?.scopes ?? [], name);
    return next(req);
  };
}

/**
 * Undefined when `authorization` carries a token of `admin` or one of `allowed`; otherwise the HTTP status (401 or
 * 403) and what is wrong, for a plain HTTP route. The same check as the RPCs', so every route of a server accepts and
 * refuses the same headers.
 */
export function bearerTokenProblem(
  authorization: string | null | undefined,
  credentials: Credentials,
  allowed: readonly Scope[],
  what: string,
): { status: 401 | 403; code: "unauthenticated" | "permission_denied"; message: string } | undefined {
  try {
    credentials.authorize(authorization, allowed, what);
    return undefined;
  } catch (error) {
    const e = ConnectError.from(error);
    return e.code === Code.PermissionDenied
      ? { status: 403, code: "permission_denied", message: e.rawMessage }
      : { status: 401, code: "unauthenticated", message: e.rawMessage };
  }
}
