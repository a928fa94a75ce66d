/**
 * Store load generator: N simulated runners do the full lifecycle against a real `agl serve` process: the algorithm
 * enqueues in batches; each runner claims up to --dequeue-batch rollouts at once (its free slots) and, per rollout,
 * sends spans of ~1 KB in batches of --span-batch, the last batch riding with the UpdateAttempt that reports success.
 * Prints rollouts/s, spans/s, latency percentiles per RPC and the server's peak RSS. A warm-up of --warmup rollouts
 * (default 1000) runs first and is not counted: the figures are the steady state, not the JIT compiling the server.
 *
 * The server runs compiled (`make build` first; `make bench-store` does both), as it would in production.
 *
 *   npx tsx bench/store/run.ts --backend sqlite --runners 64 --rollouts 5000
 *   npx tsx bench/store/run.ts --backend postgres --servers 2     # two servers on one database, runners split
 *   npx tsx bench/store/run.ts --profile /tmp/prof                 # V8 CPU profiles of the servers
 *   npx tsx bench/store/run.ts --agl-root ../base                  # the compiled server of another checkout
 *   npx tsx bench/store/run.ts --runners 128 --hold-ms 2000         # the demo's shape: rollouts that last a while
 *   npx tsx bench/store/run.ts --no-call-stream                     # each unary call a call of its own (no CallStream)
 *
 * PostgreSQL: --database URL, else $AGL_TEST_POSTGRES_URL, else the project's private server (scripts/postgres.sh
 * start). Each run uses a fresh schema, dropped afterwards.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { createStoreClient } from "../../src/client/store-client.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../../test/support/server-process.js";
import { spanMaker } from "./spans.js";
import { processCpuSeconds, statCpuSeconds } from "../stats.js";

const { values: args } = parseArgs({
  options: {
    backend: { type: "string", default: "memory" },
    runners: { type: "string", default: "64" },
    rollouts: { type: "string", default: "5000" },
    warmup: { type: "string", default: "1000" },
    spans: { type: "string", default: "10" },
    "span-bytes": { type: "string", default: "1024" },
    "span-batch": { type: "string", default: "5" },
    "dequeue-batch": { type: "string", default: "4" },
    "enqueue-batch": { type: "string", default: "100" },
    url: { type: "string" },
    database: { type: "string" },
    servers: { type: "string", default: "1" },
    connections: { type: "string", default: "8" },
    profile: { type: "string" },
    "agl-root": { type: "string" },
    "hold-ms": { type: "string", default: "0" },
    "no-call-stream": { type: "boolean", default: false },
  },
});
const serverCount = Number(args.servers);
if (!(serverCount >= 1)) throw new Error("--servers must be at least 1");
if (serverCount > 1 && args.backend !== "postgres") throw new Error("--servers above 1 needs --backend postgres");
const runners = Number(args.runners);
const total = Number(args.rollouts);
const warmup = Number(args.warmup);
const spansPerRollout = Number(args.spans);
const spanBatch = Number(args["span-batch"]);
const enqueueBatch = Number(args["enqueue-batch"]);
const dequeueBatch = Number(args["dequeue-batch"]);
const makeSpans = spanMaker(Number(args["span-bytes"]));

const dir = mkdtempSync(join(tmpdir(), "agl-bench-"));
let postgres: { url: string; schema: string; stop?: () => void } | undefined;
if (args.backend === "postgres" && !args.url) {
  const url = args.database ?? process.env.AGL_TEST_POSTGRES_URL;
  if (url) postgres = { url, schema: `bench_${randomBytes(6).toString("hex")}` };
  else {
    // Under a lease: a test run that shares the server does not stop it under us, nor we under it.
    const script = new URL("../../scripts/postgres.sh", import.meta.url).pathname;
    const env = { ...process.env, AGL_POSTGRES_LEASE: String(process.pid) };
    postgres = {
      url: execFileSync(script, ["start"], { encoding: "utf8", env }).trim(),
      schema: `bench_${randomBytes(6).toString("hex")}`,
      stop: () => execFileSync(script, ["stop"], { env, stdio: "inherit" }),
    };
  }
}
const backendArgs =
  args.backend === "memory"
    ? ["--memory"]
    : postgres
      ? ["--database", `${postgres.url}${postgres.url.includes("?") ? "&" : "?"}schema=${postgres.schema}`]
      : ["--database", join(dir, "bench.db")];
// --url measures a server started elsewhere (for example under a profiler); RSS is then not reported.
const servers: ServerProcess[] = [];
// --profile DIR writes each server's V8 CPU profile there when it stops (open it in Chrome DevTools or speedscope).
const nodeArgs = args.profile ? ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${args.profile}`] : [];
for (let i = 0; !args.url && i < serverCount; i++)
  servers.push(await startServerProcess(backendArgs, { compiled: true, nodeArgs, root: args["agl-root"] }));
const urls = args.url ? [args.url] : servers.map((s) => s.url);
// Real runners each hold their own connection; one HTTP/2 connection for all of them would serialise their traffic.
const connections = Math.max(urls.length, Number(args.connections));
const clients = Array.from({ length: connections }, (_, i) =>
  createStoreClient({ baseUrl: urls[i % urls.length], callStream: !args["no-call-stream"] }),
);
const client = clients[0]!;

const latencies = new Map<string, number[]>();
async function timed<T>(name: string, call: () => Promise<T>): Promise<T> {
  const start = performance.now();
  const result = await call();
  const list = latencies.get(name) ?? [];
  list.push(performance.now() - start);
  latencies.set(name, list);
  return result;
}

/**
 * CPU seconds the server processes have used so far (Linux /proc): in all, on their main threads (where requests and
 * SQLite run), and on V8's helper threads (`V8Worker`: concurrent garbage collection and compilation).
 */
function serverCpuSeconds(): { total: number; main: number; v8: number } {
  const cpu = { total: 0, main: 0, v8: 0 };
  for (const server of servers) {
    cpu.total += processCpuSeconds(server.pid);
    for (const thread of readdirSync(`/proc/${server.pid}/task`)) {
      const task = `/proc/${server.pid}/task/${thread}`;
      const seconds = statCpuSeconds(readFileSync(`${task}/stat`, "utf8"));
      if (thread === String(server.pid)) cpu.main += seconds;
      else if (readFileSync(`${task}/comm`, "utf8").startsWith("V8Worker")) cpu.v8 += seconds;
    }
  }
  return cpu;
}

let peakRss = 0;
const rssTimer = setInterval(() => {
  for (const server of servers) {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"));
    if (match) peakRss = Math.max(peakRss, Number(match[1]) * 1024);
  }
}, 100);

let done = 0;
let spansStored = 0;

async function enqueueAll(total: number) {
  for (let sent = 0; sent < total; sent += enqueueBatch) {
    const count = Math.min(enqueueBatch, total - sent);
    const rollouts = Array.from({ length: count }, (_, i) => ({ metadata: { task: sent + i } }));
    await timed("EnqueueRollouts", () => client.enqueueRollouts({ rollouts }));
  }
}

const holdMs = Number(args["hold-ms"]);

async function runOne(client: (typeof clients)[number], rolloutId: string, attemptId: string) {
  // The agent at work: the rollout stays active meanwhile, as the watchdog sees it.
  if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
  let sent = 0;
  while (spansPerRollout - sent > spanBatch) {
    const { acks } = await timed("AddSpans", () => client.addSpans({ spans: makeSpans(rolloutId, attemptId, spanBatch) }));
    sent += acks.length;
  }
  const spans = makeSpans(rolloutId, attemptId, spansPerRollout - sent);
  await timed("UpdateAttempt", () => client.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans }));
  spansStored += spansPerRollout;
  done++;
}

async function runner(index: number, total: number) {
  const workerId = `bench-${index}`;
  // Runners are split evenly across the connections, and so across the servers.
  const client = clients[index % clients.length]!;
  while (done < total) {
    const { rollouts } = await timed("DequeueRollouts", () => client.dequeueRollouts({ workerId, limit: dequeueBatch, waitSeconds: 0.2 }));
    await Promise.all(rollouts.map((r) => runOne(client, r.rolloutId, r.latestAttempt?.attemptId ?? "")));
  }
}

/** Runs `count` rollouts through every runner, from zeroed counters. */
async function runPhase(count: number) {
  done = 0;
  spansStored = 0;
  latencies.clear();
  await Promise.all([enqueueAll(count), ...Array.from({ length: runners }, (_, i) => runner(i, count))]);
}

if (warmup > 0) await runPhase(warmup);
const serverCpuStart = serverCpuSeconds();
const clientCpuStart = process.cpuUsage();
const started = performance.now();
await runPhase(total);
const seconds = (performance.now() - started) / 1000;
const serverCpuEnd = serverCpuSeconds();
const serverCpu = {
  total: serverCpuEnd.total - serverCpuStart.total,
  main: serverCpuEnd.main - serverCpuStart.main,
  v8: serverCpuEnd.v8 - serverCpuStart.v8,
};
const clientCpuUsage = process.cpuUsage(clientCpuStart);
const clientCpu = (clientCpuUsage.user + clientCpuUsage.system) / 1e6;
clearInterval(rssTimer);

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
console.log(
  `backend=${args.backend} servers=${urls.length} connections=${clients.length} runners=${runners} dequeue-batch=${dequeueBatch} ` +
    `rollouts=${total} (after ${warmup} warm-up) spans/rollout=${spansPerRollout} span-batch=${spanBatch}`,
);
console.log(`rollouts/s: ${(done / seconds).toFixed(0)}   spans/s: ${(spansStored / seconds).toFixed(0)}   wall: ${seconds.toFixed(2)} s`);
for (const [name, list] of latencies) {
  const sorted = [...list].sort((a, b) => a - b);
  console.log(
    `  ${name.padEnd(16)} calls=${String(sorted.length).padStart(6)}  p50=${pct(sorted, 0.5).toFixed(2)} ms  ` +
      `p99=${pct(sorted, 0.99).toFixed(2)} ms`,
  );
}
if (servers.length > 0) {
  console.log(`server peak RSS: ${(peakRss / 2 ** 20).toFixed(0)} MiB${servers.length > 1 ? " (largest server)" : ""}`);
  // CPU per rollout depends less on what else the machine runs than rollouts/s. The load generator's does the same
  // work whatever server it drives: how it moves between runs shows how the machine's speed moved.
  const perRollout = (cpu: number) => ((cpu / done) * 1000).toFixed(3);
  console.log(
    `CPU per rollout: server${servers.length > 1 ? "s" : ""} ${perRollout(serverCpu.total)} ms (main thread ` +
      `${perRollout(serverCpu.main)}, V8 helpers ${perRollout(serverCpu.v8)}), load generator ${perRollout(clientCpu)} ms`,
  );
}

for (const c of clients) c.close();
await Promise.all(servers.map((s) => s.stop()));
if (postgres) {
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${postgres.schema} CASCADE`);
  await admin.end();
  postgres.stop?.();
}
rmSync(dir, { recursive: true, force: true });
