import { DEFAULT_UNRESPONSIVE_SECONDS, DEFAULT_WORKER_GONE_SECONDS } from "../store/liveness.js";
import type { ScopedToken } from "../core/credentials.js";
import type { TlsFiles } from "../core/tls.js";
import {
  ADVERTISE_USAGE,
  acceptedTokens,
  SERVER_TLS_FLAGS,
  SERVER_TLS_USAGE,
  serverTlsFiles,
  TOKEN_FLAGS,
  TOKEN_USAGE,
} from "./access-flags.js";
import { checkUrl, integer, parseFlags, seconds, UsageError } from "./flags.js";

/** What `agl serve` was asked to do. */
export interface ServeArgs {
  host: string;
  port: number;
  /** The URL consumers on other hosts reach the store at (`--advertise`). */
  advertise?: string;
  /** The tokens calls need, with their scopes; absent: none. */
  tokens?: ScopedToken[];
  /** Serve TLS (with `caFile`: mutual TLS). */
  tls?: TlsFiles;
  /** How the proxy verifies https engines (`--proxy-ca-file`). */
  engineCaFile?: string;
  backend: { kind: "memory" } | { kind: "sqlite"; path: string } | { kind: "postgres"; url: string };
  maxMessageBytes: number;
  /** The watchdog's limits, in `createStore`'s terms (0 turns one off). */
  liveness: { defaultUnresponsiveSeconds: number; workerGoneSeconds: number };
  /** Serve the LLM proxy on the same port; `backends` are fixed engines (none: follow the store's LLM resource). */
  proxy?: { backends: string[]; model?: string; tokenIn?: boolean };
  /** Serve the dashboard at `/` (absent with --no-ui); `dir` overrides where its built files are. */
  ui?: { dir?: string };
  help: boolean;
}

const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export const SERVE_USAGE = `Usage: agl serve [options]

Serves the store on one port: gRPC, Connect, gRPC-Web and JSON over HTTP.

Options:
  --host <host>               address to listen on (default 127.0.0.1)
  --port <port>               port to listen on; 0 picks a free one (default 4747)
${ADVERTISE_USAGE}${TOKEN_USAGE}${SERVER_TLS_USAGE}  --memory                    keep data in memory only
  --database <path|url>       SQLite database file (default ./agl.db), or a postgres://… URL: PostgreSQL,
                              which several servers may share (URL parameters: schema=NAME, default agl;
                              pool_size=N connections, default 10)
  --max-message-bytes <n>     largest request or response message (default 16777216)
  --unresponsive-seconds <s>  an attempt without a span or heartbeat this long is unresponsive, when its rollout's
                              config sets no unresponsive_seconds (default 30; 0: never)
  --worker-gone-seconds <s>   a worker without a heartbeat this long is gone: its running attempts are unresponsive
                              at once (default 30; 0: never)
  --proxy                     also serve the LLM proxy (/v1/..., /rollout/{id}/attempt/{id}/v1/..., /proxy/...)
                              on this port; engines come from the latest LLM resource in the store
  --proxy-backend <url>       a fixed engine for the proxy instead (OpenAI base URL; repeatable; implies --proxy)
  --proxy-model <name>        the model the fixed engines serve
  --proxy-token-in            the proxy's token-in mode: a rollout's next calls go to the engine as token ids that
                              extend its previous call's (implies --proxy)
  --proxy-ca-file <file>      verify https engines against this PEM CA (default $AGL_CA_FILE, else the system's)
  --no-ui                     do not serve the dashboard (by default: GET / on this port, from dist/ui/ of the
                              package, built by 'make build'; it reads the store through the RPCs, with the token)
  --ui-dir <dir>              serve the dashboard built in this directory instead
  -h, --help                  show this help
`;

/** Parses the arguments after `serve`; `env` supplies AGL_TOKEN. Throws {@link UsageError}. */
export function parseServeArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ServeArgs {
  const { values } = parseFlags({
    args: [...argv],
    allowPositionals: false,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      advertise: { type: "string" },
      ...TOKEN_FLAGS,
      ...SERVER_TLS_FLAGS,
      "proxy-ca-file": { type: "string" },
      memory: { type: "boolean" },
      database: { type: "string" },
      "max-message-bytes": { type: "string" },
      "unresponsive-seconds": { type: "string" },
      "worker-gone-seconds": { type: "string" },
      proxy: { type: "boolean" },
      "proxy-backend": { type: "string", multiple: true },
      "proxy-model": { type: "string" },
      "proxy-token-in": { type: "boolean" },
      "no-ui": { type: "boolean" },
      "ui-dir": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.memory === true && values.database !== undefined) {
    throw new UsageError("--memory and --database exclude each other");
  }
  if (values["no-ui"] === true && values["ui-dir"] !== undefined) {
    throw new UsageError("--no-ui and --ui-dir exclude each other");
  }
  const tls = serverTlsFiles(values);
  if (values.advertise !== undefined) checkUrl(values.advertise, "--advertise");
  const engineCaFile = values["proxy-ca-file"] ?? (env.AGL_CA_FILE || undefined);
  const tokens = acceptedTokens(values, env);
  const maxBytes = values["max-message-bytes"];
  const proxyBackends = values["proxy-backend"] ?? [];
  for (const url of proxyBackends) checkUrl(url, "--proxy-backend");
  const proxyModel = values["proxy-model"];
  const tokenIn = values["proxy-token-in"] === true;
  const proxy =
    values.proxy === true || proxyBackends.length > 0 || tokenIn
      ? { backends: proxyBackends, ...(proxyModel ? { model: proxyModel } : {}), ...(tokenIn ? { tokenIn } : {}) }
      : undefined;
  return {
    host: values.host ?? "127.0.0.1",
    port: integer(values.port ?? "4747", "--port", 0, 65_535),
    ...(values.advertise === undefined ? {} : { advertise: values.advertise }),
    ...(tokens === undefined ? {} : { tokens }),
    ...(tls ? { tls } : {}),
    ...(engineCaFile ? { engineCaFile } : {}),
    backend: values.memory === true ? { kind: "memory" } : databaseBackend(values.database ?? "./agl.db"),
    maxMessageBytes: integer(maxBytes ?? String(DEFAULT_MAX_MESSAGE_BYTES), "--max-message-bytes", 1, 2 ** 31 - 1),
    liveness: {
      defaultUnresponsiveSeconds: seconds(values["unresponsive-seconds"], "--unresponsive-seconds", DEFAULT_UNRESPONSIVE_SECONDS),
      workerGoneSeconds: seconds(values["worker-gone-seconds"], "--worker-gone-seconds", DEFAULT_WORKER_GONE_SECONDS),
    },
    ...(proxy ? { proxy } : {}),
    ...(values["no-ui"] === true ? {} : { ui: values["ui-dir"] === undefined ? {} : { dir: values["ui-dir"] } }),
    help: values.help === true,
  };
}

/** `--database`: a postgres:// or postgresql:// URL selects PostgreSQL; anything else is a SQLite file path. */
function databaseBackend(database: string): ServeArgs["backend"] {
  return /^postgres(ql)?:\/\//i.test(database) ? { kind: "postgres", url: database } : { kind: "sqlite", path: database };
}
