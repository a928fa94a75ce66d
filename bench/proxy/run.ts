/**
 * LLM proxy overhead: the same chat completion sent straight to the engine and through the proxy, one at a time
 * (latency, not throughput), streamed and not. Three processes: this client, the engine (the fake vLLM) and
 * `agl serve --memory --proxy` (store, triplets and proxy on one port, as deployed). Through the proxy every call is
 * attempt-scoped, so it is validated and its span (ids, logprobs, bodies) is stored before the client sees the end of
 * the answer. Prints p50/p90/p99 per path and the p50 the proxy adds (target < 1 ms).
 *
 *   npx tsx bench/proxy/run.ts --requests 2000 [--compiled] [--backend memory|sqlite]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as http from "node:http";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { startServerProcess } from "../../test/support/server-process.js";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "2000" },
    warmup: { type: "string", default: "300" },
    compiled: { type: "boolean", default: false },
    backend: { type: "string", default: "memory" },
  },
});
const requests = Number(args.requests);
const warmup = Number(args.warmup);
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

function startEngine(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/proxy/engine.ts"], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m?.[1]) resolve({ url: m[1], child });
    });
    child.once("exit", (code) => reject(new Error(`engine exited with ${code}`)));
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** POSTs and reads the whole answer; resolves to milliseconds. */
function timedPost(url: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode}`));
      res.on("data", () => {});
      res.on("end", () => resolve(performance.now() - start));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;

async function series(url: string, body: string): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await timedPost(url, body);
  const out: number[] = [];
  for (let i = 0; i < requests; i++) out.push(await timedPost(url, body));
  return out.sort((a, b) => a - b);
}

const engine = await startEngine();
const dir = mkdtempSync(join(tmpdir(), "agl-bench-proxy-"));
const storage = args.backend === "sqlite" ? ["--database", join(dir, "bench.db")] : ["--memory"];
const server = await startServerProcess([...storage, "--proxy-backend", engine.url, "--proxy-model", "fake-model"], { compiled: args.compiled });
const store = createStoreClient({ baseUrl: server.url });
await store.enqueueRollouts({ rollouts: [{}] });
const [rollout] = (await store.dequeueRollouts({ workerId: "bench" })).rollouts;
const scoped = `${server.url}/rollout/${rollout?.rolloutId}/attempt/${rollout?.latestAttempt?.attemptId}/v1`;

const messages = [
  { role: "system", content: "You are a helpful assistant. ".repeat(20) },
  { role: "user", content: "Tell me about foxes. ".repeat(10) },
];
const rows: [string, number[]][] = [];
for (const stream of [false, true]) {
  const clientBody = JSON.stringify({ model: "fake-model", messages, stream });
  // The engine gets exactly what the proxy would send it, so both paths cost the engine the same.
  const engineBody = JSON.stringify({ model: "fake-model", messages, stream, return_token_ids: true, logprobs: true });
  const kind = stream ? "streamed" : "whole";
  rows.push([`direct, ${kind}`, await series(`${engine.url}/chat/completions`, engineBody)]);
  rows.push([`proxy, ${kind}`, await series(`${scoped}/chat/completions`, clientBody)]);
  rows.push([`proxy unattributed, ${kind}`, await series(`${server.url}/v1/chat/completions`, clientBody)]);
}
const spans = (await store.querySpans({ rolloutId: rollout?.rolloutId as string, page: { limit: 0 } })).page?.total;

console.log(`${requests} sequential calls per row (after ${warmup} warm-up), ~30 response tokens, ${args.compiled ? "compiled" : "tsx"} server, ${args.backend} store`);
console.log("path                                p50 ms   p90 ms   p99 ms");
for (const [name, sorted] of rows) {
  console.log(`${name.padEnd(34)} ${[50, 90, 99].map((p) => pct(sorted, p).toFixed(3).padStart(8)).join(" ")}`);
}
for (const kind of ["whole", "streamed"]) {
  const direct = rows.find(([n]) => n === `direct, ${kind}`)?.[1] as number[];
  const proxied = rows.find(([n]) => n === `proxy, ${kind}`)?.[1] as number[];
  console.log(`added by the proxy (${kind}): p50 ${(pct(proxied, 50) - pct(direct, 50)).toFixed(3)} ms, p99 ${(pct(proxied, 99) - pct(direct, 99)).toFixed(3)} ms`);
}
console.log(`spans stored for the scoped calls: ${spans}`);
store.close();
await server.stop();
engine.child.kill("SIGTERM");
agent.destroy();
rmSync(dir, { recursive: true, force: true });
