/**
 * Store load generator: N simulated runners do the full lifecycle against a real `agl serve` process: the algorithm
 * enqueues in batches; each runner claims up to --dequeue-batch rollouts at once (its free slots) and, per rollout,
 * sends spans of ~1 KB in batches of --span-batch, the last batch riding with the UpdateAttempt that reports success.
 * Prints rollouts/s, spans/s, latency percentiles per RPC and the server's peak RSS.
 *
 * The server runs compiled (`make build` first; `make bench-store` does both), as it would in production.
 *
 *   npx tsx bench/store/run.ts --backend sqlite --runners 64 --rollouts 5000
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { startServerProcess } from "../../test/support/server-process.js";

const { values: args } = parseArgs({
  options: {
    backend: { type: "string", default: "memory" },
    runners: { type: "string", default: "64" },
    rollouts: { type: "string", default: "5000" },
    spans: { type: "string", default: "10" },
    "span-bytes": { type: "string", default: "1024" },
    "span-batch": { type: "string", default: "5" },
    "dequeue-batch": { type: "string", default: "4" },
    "enqueue-batch": { type: "string", default: "100" },
    url: { type: "string" },
  },
});
const runners = Number(args.runners);
const total = Number(args.rollouts);
const spansPerRollout = Number(args.spans);
const spanBatch = Number(args["span-batch"]);
const enqueueBatch = Number(args["enqueue-batch"]);
const dequeueBatch = Number(args["dequeue-batch"]);
const payload = randomBytes(Math.max(0, Number(args["span-bytes"]) - 200) / 2).toString("hex");

const dir = mkdtempSync(join(tmpdir(), "agl-bench-"));
const backendArgs = args.backend === "memory" ? ["--memory"] : ["--database", join(dir, "bench.db")];
// --url measures a server started elsewhere (for example under a profiler); RSS is then not reported.
const server = args.url ? undefined : await startServerProcess(backendArgs, { compiled: true });
const client = createStoreClient({ baseUrl: args.url ?? server?.url });

const latencies = new Map<string, number[]>();
async function timed<T>(name: string, call: () => Promise<T>): Promise<T> {
  const start = performance.now();
  const result = await call();
  const list = latencies.get(name) ?? [];
  list.push(performance.now() - start);
  latencies.set(name, list);
  return result;
}

/** User + system CPU seconds the server process has used so far (Linux /proc). */
function serverCpuSeconds(): number {
  if (!server) return 0;
  const fields = readFileSync(`/proc/${server.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

let peakRss = 0;
const rssTimer = setInterval(() => {
  if (!server) return;
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"));
  if (match) peakRss = Math.max(peakRss, Number(match[1]) * 1024);
}, 100);

let done = 0;
let spansStored = 0;
const serverCpuStart = serverCpuSeconds();
const clientCpuStart = process.cpuUsage();
const started = performance.now();

async function enqueueAll() {
  for (let sent = 0; sent < total; sent += enqueueBatch) {
    const count = Math.min(enqueueBatch, total - sent);
    const rollouts = Array.from({ length: count }, (_, i) => ({ metadata: { task: sent + i } }));
    await timed("EnqueueRollouts", () => client.enqueueRollouts({ rollouts }));
  }
}

function makeSpans(rolloutId: string, attemptId: string, count: number) {
  // One random draw per batch, as a tracer's id generator would amortise it.
  const ids = randomBytes(24 * count).toString("hex");
  return Array.from({ length: count }, (_, i) => ({
    rolloutId,
    attemptId,
    spanId: ids.slice(48 * i, 48 * i + 16),
    traceId: ids.slice(48 * i + 16, 48 * i + 48),
    name: "llm.call",
    attributes: { payload: { value: { case: "stringValue" as const, value: payload } } },
  }));
}

async function runOne(rolloutId: string, attemptId: string) {
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

async function runner(index: number) {
  const workerId = `bench-${index}`;
  while (done < total) {
    const { rollouts } = await timed("DequeueRollouts", () =>
      client.dequeueRollouts({ workerId, limit: dequeueBatch, waitSeconds: 0.2 }),
    );
    await Promise.all(rollouts.map((r) => runOne(r.rolloutId, r.latestAttempt?.attemptId ?? "")));
  }
}

await Promise.all([enqueueAll(), ...Array.from({ length: runners }, (_, i) => runner(i))]);
const seconds = (performance.now() - started) / 1000;
const serverCpu = serverCpuSeconds() - serverCpuStart;
const clientCpuUsage = process.cpuUsage(clientCpuStart);
const clientCpu = (clientCpuUsage.user + clientCpuUsage.system) / 1e6;
clearInterval(rssTimer);

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
console.log(
  `backend=${args.backend} runners=${runners} dequeue-batch=${dequeueBatch} rollouts=${total} spans/rollout=${spansPerRollout} span-batch=${spanBatch}`,
);
console.log(`rollouts/s: ${(done / seconds).toFixed(0)}   spans/s: ${(spansStored / seconds).toFixed(0)}   wall: ${seconds.toFixed(2)} s`);
for (const [name, list] of latencies) {
  const sorted = [...list].sort((a, b) => a - b);
  console.log(
    `  ${name.padEnd(16)} calls=${String(sorted.length).padStart(6)}  p50=${pct(sorted, 0.5).toFixed(2)} ms  p99=${pct(sorted, 0.99).toFixed(2)} ms`,
  );
}
if (server) {
  console.log(`server peak RSS: ${(peakRss / 2 ** 20).toFixed(0)} MiB`);
  // CPU per rollout does not depend on what else the machine runs, unlike rollouts/s.
  const perRollout = (cpu: number) => ((cpu / done) * 1000).toFixed(3);
  console.log(`CPU per rollout: server ${perRollout(serverCpu)} ms, load generator ${perRollout(clientCpu)} ms`);
}

client.close();
await server?.stop();
rmSync(dir, { recursive: true, force: true });
