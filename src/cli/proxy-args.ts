import { checkUrl, integer, parseFlags, type UsageError } from "./flags.js";
import { parseStoreConnection, type StoreConnection, storeConnectionFlags } from "./store-flags.js";

/** What `agl proxy` was asked to do. */
export interface ProxyArgs {
  /** The store; its token is also required from the proxy's clients. */
  store: StoreConnection & { baseUrl: string };
  host: string;
  port: number;
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
  --token <token>        the store's token, also required from proxy clients (default: $AGL_TOKEN, else none)
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
  return {
    store,
    host: values.host ?? "127.0.0.1",
    port: integer(values.port ?? "4748", "--port", 0, 65_535),
    backends,
    ...(values.model ? { model: values.model } : {}),
    maxRetries: integer(values["max-retries"] ?? "3", "--max-retries", 0, 100),
    spansFirst: values["spans-first"] === true,
    tokenIn: values["token-in"] === true,
    help,
  };
}
