import { RUNNER_HEARTBEAT_SECONDS } from "../store/liveness.js";
import { parseFlags, seconds, UsageError } from "./flags.js";
import { parseStoreConnection, STORE_TLS_USAGE, type StoreConnection, storeConnectionFlags } from "./store-flags.js";

/** What `agl run` was asked to do. */
export interface RunArgs {
  agentModule: string;
  exportName?: string;
  store: StoreConnection & { baseUrl: string };
  /** Worker threads; 0 runs agents on the main thread. */
  workers: number;
  concurrency: number;
  workerId?: string;
  maxRollouts?: number;
  pollWaitSeconds: number;
  blockedWorkerMs: number;
  shutdownGraceMs: number;
  /** Period of the runner's heartbeats (silent attempts and the worker). */
  heartbeatMs: number;
  /** Ping period of the connection to the store (0: no pings). */
  keepaliveMs: number;
  help: boolean;
}

export const RUN_USAGE = `Usage: agl run <agent-module> [options]

Runs an agent against a store: claims rollouts, runs them on worker threads, reports spans and outcomes.
The module exports the agent: export default rollout(async (task, resources, ctx) => reward), or a class or
object with rollout(). TypeScript modules load through tsx.

Options:
  --store <url>               the store server (default $AGL_STORE_URL, else http://127.0.0.1:4747)
  --token <token>             bearer token of the store (default $AGL_TOKEN); a runner's token is enough
${STORE_TLS_USAGE}  --workers <n>               worker threads; 0 runs agents on the main thread (default 1)
  --concurrency <m>           rollouts each worker runs at once (default 8)
  --export <name>             the module's export holding the agent (default: default, else agent)
  --worker-id <id>            how this runner appears among the store's workers (default host-pid)
  --max-rollouts <k>          exit after finishing k rollouts
  --poll-wait <seconds>       server-side wait of each dequeue (default 2)
  --blocked-worker-ms <ms>    terminate a worker thread whose event loop is blocked this long (default 10000)
  --shutdown-grace <seconds>  on SIGTERM/SIGINT, let running rollouts finish this long; then abort the rest and
                              hand them back to the queue at once (default 30; a second signal exits at once)
  --heartbeat <seconds>       heartbeat period of silent attempts and of the worker (default 5); the store takes a
                              runner silent for six periods of its default (30 s) as gone and retries its rollouts
  --keepalive <seconds>       ping the store this often during calls; a connection whose ping goes unanswered as
                              long is reopened, so a cut network is noticed quickly (default 10; 0: no pings)
  -h, --help                  show this help
`;

function integer(value: string | undefined, flag: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`${flag} needs an integer ≥ ${min}, got "${value}"`);
  return n;
}

/** Parses the arguments after `run`. Throws {@link UsageError}. */
export function parseRunArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): RunArgs {
  const parsed = parseFlags({
    args: [...argv],
    allowPositionals: true,
    options: {
      ...storeConnectionFlags,
      workers: { type: "string" },
      concurrency: { type: "string" },
      export: { type: "string" },
      "worker-id": { type: "string" },
      "max-rollouts": { type: "string" },
      "poll-wait": { type: "string" },
      "blocked-worker-ms": { type: "string" },
      "shutdown-grace": { type: "string" },
      heartbeat: { type: "string" },
      keepalive: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const { values, positionals } = parsed;
  const help = values.help === true;
  if (!help && positionals.length !== 1) throw new UsageError("give exactly one agent module: agl run <agent-module>");
  const args: RunArgs = {
    agentModule: positionals[0] ?? "",
    store: parseStoreConnection(values, env, "default"),
    workers: integer(values.workers, "--workers", 1, 0),
    concurrency: integer(values.concurrency, "--concurrency", 8, 1),
    pollWaitSeconds: seconds(values["poll-wait"], "--poll-wait", 2),
    blockedWorkerMs: integer(values["blocked-worker-ms"], "--blocked-worker-ms", 10_000, 100),
    shutdownGraceMs: seconds(values["shutdown-grace"], "--shutdown-grace", 30) * 1000,
    heartbeatMs: seconds(values.heartbeat, "--heartbeat", RUNNER_HEARTBEAT_SECONDS) * 1000,
    keepaliveMs: seconds(values.keepalive, "--keepalive", 10) * 1000,
    help,
  };
  if (args.heartbeatMs < 50) throw new UsageError(`--heartbeat needs at least 0.05 seconds, got "${values.heartbeat}"`);
  if (values.export !== undefined) args.exportName = values.export;
  if (values["worker-id"] !== undefined) args.workerId = values["worker-id"];
  if (values["max-rollouts"] !== undefined) args.maxRollouts = integer(values["max-rollouts"], "--max-rollouts", 0, 1);
  return args;
}
