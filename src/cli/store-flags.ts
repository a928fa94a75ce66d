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
  /** `--ca-file`, else $AGL_CA_FILE: the CA https servers (the store, the proxy, engines) are verified against. */
  caFile?: string;
  /** `--client-cert` and `--client-key`: this client's certificate for mutual TLS. */
  certFile?: string;
  keyFile?: string;
}

/** The connection flags' `parseFlags` options, to spread into a command's own. */
export const storeConnectionFlags = {
  store: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  "client-cert": { type: "string" },
  "client-key": { type: "string" },
} as const;

/** Usage lines of the TLS flags among {@link storeConnectionFlags}. */
export const STORE_TLS_USAGE = `  --ca-file <file>            verify https servers against this PEM CA (default $AGL_CA_FILE, else the system's)
  --client-cert <file>        mutual TLS: this PEM certificate (needs --client-key)
  --client-key <file>         its private key
`;

/**
 * What a command does without `--store`: refuse to run ("required"), start a store of its own ("own": `baseUrl`
 * stays absent), or use the default store ("default": $AGL_STORE_URL, else http://127.0.0.1:4747).
 */
export type WithoutStore = "required" | "own" | "default";

/** The values `parseFlags` read for {@link storeConnectionFlags}. */
export interface StoreConnectionValues {
  store?: string | undefined;
  token?: string | undefined;
  "ca-file"?: string | undefined;
  "client-cert"?: string | undefined;
  "client-key"?: string | undefined;
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
  const caFile = values["ca-file"] ?? (env.AGL_CA_FILE || undefined);
  const [certFile, keyFile] = [values["client-cert"], values["client-key"]];
  if ((certFile === undefined) !== (keyFile === undefined)) throw new UsageError("--client-cert and --client-key go together");
  return {
    ...(baseUrl === undefined ? {} : { baseUrl }),
    ...(token ? { token } : {}),
    ...(caFile ? { caFile } : {}),
    ...(certFile && keyFile ? { certFile, keyFile } : {}),
  };
}

/** The command-line flags that pass `connection` on to a child `agl` process. */
export function storeConnectionArgv(connection: StoreConnection): string[] {
  return [
    ...(connection.baseUrl === undefined ? [] : ["--store", connection.baseUrl]),
    ...(connection.token === undefined ? [] : ["--token", connection.token]),
    ...(connection.caFile === undefined ? [] : ["--ca-file", connection.caFile]),
    ...(connection.certFile === undefined || connection.keyFile === undefined
      ? []
      : ["--client-cert", connection.certFile, "--client-key", connection.keyFile]),
  ];
}
