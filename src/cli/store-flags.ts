import { checkUrl, UsageError } from "./flags.js";

/**
 * How a command reaches a running store, read from the command line the same way by `agl run`, `proxy`, `train` and
 * `apo`. Its fields are `createStoreClient`'s options, so it spreads into them. A new connection flag (TLS, a CA, a
 * credential's scope) is a field here and an entry of {@link storeConnectionFlags}, read by
 * {@link parseStoreConnection} and passed on by {@link storeConnectionArgv}.
 */
export interface StoreConnection {
  /** `--store`: the store's http(s) URL; absent when the command starts a store of its own. */
  baseUrl?: string;
  /** `--token`, else $AGL_TOKEN: the store's bearer token. */
  token?: string;
}

/** The connection flags' `parseFlags` options, to spread into a command's own. */
export const storeConnectionFlags = {
  store: { type: "string" },
  token: { type: "string" },
} as const;

/**
 * What a command does without `--store`: refuse to run ("required"), start a store of its own ("own": `baseUrl`
 * stays absent), or use the default store ("default": $AGL_STORE_URL, else http://127.0.0.1:4747).
 */
export type WithoutStore = "required" | "own" | "default";

/** The values `parseFlags` read for {@link storeConnectionFlags}. */
export interface StoreConnectionValues {
  store?: string | undefined;
  token?: string | undefined;
}

/** Reads the connection flags; `env` supplies AGL_TOKEN (and AGL_STORE_URL for "default"). Throws {@link UsageError}. */
export function parseStoreConnection(
  values: StoreConnectionValues,
  env: NodeJS.ProcessEnv,
  without: "required" | "default",
): StoreConnection & { baseUrl: string };
export function parseStoreConnection(values: StoreConnectionValues, env: NodeJS.ProcessEnv, without: WithoutStore): StoreConnection;
export function parseStoreConnection(values: StoreConnectionValues, env: NodeJS.ProcessEnv, without: WithoutStore): StoreConnection {
  const baseUrl = values.store ?? (without === "default" ? (env.AGL_STORE_URL ?? "http://127.0.0.1:4747") : undefined);
  if (baseUrl === undefined && without === "required") throw new UsageError("--store is required");
  if (baseUrl !== undefined) checkUrl(baseUrl, values.store === undefined ? "AGL_STORE_URL" : "--store");
  const token = values.token ?? env.AGL_TOKEN;
  return { ...(baseUrl === undefined ? {} : { baseUrl }), ...(token ? { token } : {}) };
}

/** The command-line flags that pass `connection` on to a child `agl` process. */
export function storeConnectionArgv(connection: StoreConnection): string[] {
  return [
    ...(connection.baseUrl === undefined ? [] : ["--store", connection.baseUrl]),
    ...(connection.token === undefined ? [] : ["--token", connection.token]),
  ];
}
