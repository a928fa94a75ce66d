import { createCredentials } from "../core/credentials.js";
import { readClientTls, readServerTls } from "../core/tls.js";
import { createConsoleLogger } from "../core/logger.js";
import { createLlmProxy } from "../proxy/llm-proxy.js";
import { createOtlpTracesHandler } from "../otlp/otlp-route.js";
import { type StoreServer, startStoreServer } from "../server/store-server.js";
import type { HttpFallback } from "../server/http-handler.js";
import { createUiHandler } from "../server/ui-handler.js";
import { createMemoryBackend } from "../store/backends/memory/memory-backend.js";
import { createStore, type Store } from "../store/store.js";
import { reportAdvertised } from "./access-flags.js";
import type { ServeArgs } from "./serve-args.js";

/**
 * Runs `agl serve` until SIGTERM or SIGINT: opens the store, starts the server, prints the one line other tools
 * parse (`agl store listening on URL (backend: NAME[, tls])`), and on a signal closes the server, then the store.
 * Resolves to the process exit code.
 */
export async function serve(args: ServeArgs): Promise<number> {
  const tls = args.tls && readServerTls(args.tls);
  const credentials = args.tokens && createCredentials(args.tokens);
  const logger = createConsoleLogger({ prefix: "[serve]" });
  const store = await openStore(args);
  const proxy = args.proxy
    ? createLlmProxy({
        store,
        // This process is the only server of a memory or SQLite store, so the store can order the proxy's span writes
        // before the updates that finish attempts; with PostgreSQL another server may take those updates.
        ...(args.backend.kind === "postgres" ? {} : { pendingWrites: store.pendingWrites }),
        ...(credentials === undefined ? {} : { credentials }),
        ...(args.engineCaFile ? { upstream: { tls: readClientTls({ caFile: args.engineCaFile }) ?? {} } } : {}),
        ...(args.proxy.tokenIn ? { tokenIn: true } : {}),
        ...(args.proxy.backends.length > 0
          ? { backends: args.proxy.backends.map((endpoint) => ({ endpoint, model: args.proxy?.model ?? "" })) }
          : {}),
      })
    : undefined;
  const toProxy: HttpFallback | undefined = proxy && ((req, res) => proxy.handle(req, res));
  const dashboard = args.ui ? createUiHandler({ ...args.ui, ...(toProxy ? { next: toProxy } : {}) }) : toProxy;
  let server: StoreServer;
  try {
    server = await startStoreServer({
      store,
      host: args.host,
      port: args.port,
      maxMessageBytes: args.maxMessageBytes,
      ...(credentials === undefined ? {} : { credentials }),
      // OTLP/HTTP trace ingest (POST /v1/traces): spans from agents using a standard OpenTelemetry exporter.
      fallback: createOtlpTracesHandler({
        store,
        maxBodyBytes: args.maxMessageBytes,
        ...(credentials === undefined ? {} : { credentials }),
        onError: (error) => logger.error("OTLP ingest failed:", error),
        // Every other plain-HTTP route goes to the dashboard (GET and HEAD), then to the LLM proxy, when they run.
        ...(dashboard ? { next: dashboard } : {}),
      }),
      ...(tls === undefined ? {} : { tls }),
    });
  } catch (error) {
    await proxy?.close();
    await store.close();
    throw error;
  }
  process.stdout.write(
    `agl store listening on ${server.url} (backend: ${args.backend.kind}${tls ? ", tls" : ""}${proxy ? ", llm proxy" : ""})\n`,
  );
  reportAdvertised("agl store", server.url, args.advertise);

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  // A second signal while draining means "now".
  process.once(signal, () => process.exit(1));
  proxy?.pause({ mode: "reject", retryAfterSeconds: 1 });
  await server.close();
  await proxy?.close();
  await store.close();
  return 0;
}

async function openStore({ backend, liveness }: ServeArgs): Promise<Store> {
  if (backend.kind === "memory") return createStore({ backend: createMemoryBackend(), ...liveness });
  if (backend.kind === "postgres") {
    const { createPostgresBackend } = await import("../store/backends/postgres/postgres-backend.js");
    return createStore({ backend: await createPostgresBackend({ connectionString: backend.url }), ...liveness });
  }
  let sqlite: typeof import("../store/backends/sqlite/sqlite-backend.js");
  try {
    // Loaded on demand: the native driver is only needed for SQLite, and --memory works without it.
    sqlite = await import("../store/backends/sqlite/sqlite-backend.js");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot load the SQLite backend (${reason}); use --memory`);
  }
  return createStore({ backend: sqlite.createSqliteBackend({ path: backend.path }), ...liveness });
}
