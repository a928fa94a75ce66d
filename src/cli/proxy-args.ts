import type { ScopedToken } from "../core/credentials.js";
import type { TlsFiles } from "../core/tls.js";
import { acceptedTokens, SERVER_TLS_FLAGS, SERVER_TLS_USAGE, serverTlsFiles } from "./access-flags.js";
import { checkUrl, integer, parseFlags, type UsageError } from "./flags.js";
import { parseStoreConnection, STORE_TLS_USAGE, type StoreConnection, storeConnectionFlags } from "./store-flags.js";

/** What `agl proxy` was asked to do. */
export interface ProxyArgs {
  /** The store; its token is also required from the proxy's clients. */
  store: StoreConnection & { baseUrl: string };
  host: string;
  port: number;
  /** The URL consumers on other hosts reach the proxy at (`--advertise`). */
  advertise?: string;
  /** The tokens the proxy's clients may send, with their scopes (`--token-file`); else the store's token. */
  accepted?: ScopedToken[];
  /** Serve TLS (with `caFile`: mutual TLS). The store's CA and client certificate also verify https engines. */
  tls?: TlsFiles;
  /** Fixed engines; empty means the store's latest LLM resource. */
  backends: string[];
  model?: string;
  maxRetries: number;
  /** Store each span before its answer ends instead of promising it to the store (`--spans-first`). */
  spansFirst: boolean;
  /** Token-in mode (`--token-in`). */
  tokenIn: boolean;
  help: boolean;
}

export const PROXY_USAGE = `Usage: agl proxy --store <url> [options]

Serves the LLM proxy on its own port: /v1/chat/completions, /v1/completions, /v1/responses (OpenAI Responses),
/v1/messages (Anthropic Messages) and /v1/models, the same under /rollout/{rollout_id}/attempt/{attempt_id}/v1/..., and the admin routes /proxy/status, /proxy/pause,
/proxy/drain and /proxy/resume. Every attributed call is stored as a span with the engine's token ids.

Options:
  --store <url>          the store server (required)
  --host <host>          address to listen on (default 127.0.0.1)
  --port <port>          port to listen on; 0 picks a free one (default 4748)
  --advertise <url>      the URL agents on other hosts reach the proxy at (printed, for the trainer to publish)
  --token <token>        the store's token (a trainer's), also required from proxy clients unless --token-file is
                         given (default: $AGL_TOKEN, else none)
  --token-file <file>    the tokens proxy clients may send, one 'scope:token' a line: LLM calls need scope runner
                         or trainer, /proxy/* trainer (admin may do both)
${SERVER_TLS_USAGE}${STORE_TLS_USAGE}                              (the CA and the certificate also serve towards https engines)
  --backend <url>        a fixed engine (OpenAI base URL, repeatable); default: the store's latest LLM resource
  --model <name>         the model the fixed engines serve
  --max-retries <n>      retries of 429/5xx/timeouts before the first byte (default 3)
  --spans-first          store each call's span before its answer ends, rather than answer first and promise the
                         span to the store (needed when several store servers share one SQLite file; PostgreSQL
                         stores refuse promises by themselves)
  --token-in             token-in mode: a rollout's next calls go to the engine as token ids that extend its
                         previous call's (an llm resource's or a rollout's agl_token_in overrides it)
  -h, --help             show this help
`;

/** Parses the arguments after `proxy`; throws {@link UsageError}. */
export function parseProxyArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ProxyArgs {
  const { values } = parseFlags({
    args: [...argv],
    allowPositionals: false,
    options: {
      ...storeConnectionFlags,
      host: { type: "string" },
      port: { type: "string" },
      advertise: { type: "string" },
      "token-file": { type: "string" },
      ...SERVER_TLS_FLAGS,
      backend: { type: "string", multiple: true },
      model: { type: "string" },
      "max-retries": { type: "string" },
      "spans-first": { type: "boolean" },
      "token-in": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const help = values.help === true;
  const store = help ? { baseUrl: "" } : parseStoreConnection(values, env, "required");
  const backends = values.backend ?? [];
  for (const url of backends) checkUrl(url, "--backend");
  if (values.advertise !== undefined) checkUrl(values.advertise, "--advertise");
  const tls = serverTlsFiles(values);
  const accepted = values["token-file"] === undefined ? undefined : acceptedTokens({ "token-file": values["token-file"] }, {});
  return {
    store,
    host: values.host ?? "127.0.0.1",
    port: integer(values.port ?? "4748", "--port", 0, 65_535),
    ...(values.advertise === undefined ? {} : { advertise: values.advertise }),
    ...(accepted ? { accepted } : {}),
    ...(tls ? { tls } : {}),
    backends,
    ...(values.model ? { model: values.model } : {}),
    maxRetries: integer(values["max-retries"] ?? "3", "--max-retries", 0, 100),
    spansFirst: values["spans-first"] === true,
    tokenIn: values["token-in"] === true,
    help,
  };
}
