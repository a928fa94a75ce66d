import { createHash, timingSafeEqual } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * What a token may do: `runner` claims rollouts, reports attempts, sends spans and heartbeats; `trainer` publishes
 * resources, enqueues, reads triplets and runs the proxy's admin routes; `reader` queries (the dashboard); `admin`
 * everything.
 */
export const SCOPES = ["runner", "trainer", "reader", "admin"] as const;
export type Scope = (typeof SCOPES)[number];

/** One accepted bearer token and its scope. */
export interface ScopedToken {
  scope: Scope;
  token: string;
}

/** The tokens a server accepts: who is calling, and may they. */
export interface Credentials {
  /** The scope of the bearer token in `authorization`; throws UNAUTHENTICATED when it is missing or unknown. */
  scopeOf(authorization: string | null | undefined): Scope;
  /**
   * The caller's scope when it is `admin` or one of `allowed`; throws UNAUTHENTICATED (no or unknown token) or
   * PERMISSION_DENIED naming the scopes `what` needs.
   */
  authorize(authorization: string | null | undefined, allowed: readonly Scope[], what: string): Scope;
}

const isScope = (text: string): text is Scope => (SCOPES as readonly string[]).includes(text);
const digest = (value: string) => createHash("sha256").update(value).digest();

/** The credentials of `tokens`; throws on an empty token or one given two scopes. */
export function createCredentials(tokens: readonly ScopedToken[]): Credentials {
  const known = new Map<string, Scope>();
  for (const { scope, token } of tokens) {
    if (!isScope(scope)) throw new Error(`unknown scope "${scope}"; scopes are ${SCOPES.join(", ")}`);
    if (token === "") throw new Error(`the ${scope} token is empty`);
    const other = known.get(token);
    if (other !== undefined && other !== scope) throw new Error(`one token is given two scopes (${other} and ${scope})`);
    known.set(token, scope);
  }
  const table = [...known].map(([token, scope]) => ({ hash: digest(token), scope }));
  const scopeOf = (authorization: string | null | undefined): Scope => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (match === null) {
      throw new ConnectError("missing bearer token: send the header 'authorization: Bearer <token>'", Code.Unauthenticated);
    }
    // Constant time: every known token is compared, hashed first so lengths do not show either.
    const given = digest(match[1] ?? "");
    let found: Scope | undefined;
    for (const entry of table) if (timingSafeEqual(given, entry.hash)) found = entry.scope;
    if (found === undefined) throw new ConnectError("invalid bearer token", Code.Unauthenticated);
    return found;
  };
  return {
    scopeOf,
    authorize(authorization, allowed, what) {
      const scope = scopeOf(authorization);
      if (scope === "admin" || allowed.includes(scope)) return scope;
      throw new ConnectError(`${what} needs scope ${scopesText(allowed)}; this token has scope ${scope}`, Code.PermissionDenied);
    },
  };
}

/** `runner or trainer or admin`: the scopes that may do something, for messages. */
export const scopesText = (allowed: readonly Scope[]): string => [...allowed.filter((s) => s !== "admin"), "admin"].join(" or ");

/** `--token` values: `SCOPE=TOKEN` for a scope of {@link SCOPES}, anything else a token of scope `admin`. */
export function parseTokenSpec(spec: string): ScopedToken {
  const eq = spec.indexOf("=");
  const scope = eq < 0 ? "" : spec.slice(0, eq);
  return isScope(scope) ? { scope, token: spec.slice(eq + 1) } : { scope: "admin", token: spec };
}

/**
 * A token file: one `scope:token` per line (blank lines and `#` comments ignored). Throws naming the line of a
 * malformed entry.
 */
export function parseTokenFile(text: string, path: string): ScopedToken[] {
  const tokens: ScopedToken[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const colon = line.indexOf(":");
    const scope = colon < 0 ? "" : line.slice(0, colon).trim();
    const token = colon < 0 ? "" : line.slice(colon + 1).trim();
    if (!isScope(scope) || token === "" || /\s/.test(token)) {
      throw new Error(`${path}:${i + 1}: expected 'scope:token' with a scope of ${SCOPES.join(", ")} and a token without spaces`);
    }
    tokens.push({ scope, token });
  }
  if (tokens.length === 0) throw new Error(`${path}: no tokens (lines 'scope:token')`);
  return tokens;
}

/** The credentials of a single token, which is `admin`: what `--token TOKEN` has always meant. */
export const adminToken = (token: string): Credentials => createCredentials([{ scope: "admin", token }]);
