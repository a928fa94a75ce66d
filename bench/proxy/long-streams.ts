/**
 * What long streamed answers cost the other calls through the same proxy. `--streams` agents, each in an attempt of
 * its own, stream answers of `--tokens` tokens with logprobs and token ids (one token an event, `--chunk-ms` apart, as
 * an engine generating them) one after another, while a probe sends short whole calls (one token) through the proxy,
 * one at a time. Whatever holds the proxy's event loop shows in the probe's latency and in the gaps between two events
 * of the other streams as their clients see them. Prints both, and the proxy processes' CPU a stream.
 *
 *   npx tsx bench/proxy/long-streams.ts [--streams 8] [--tokens 2000] [--chunk-ms 1] [--seconds 20]
 *                                       [--mode serve|standalone] [--agl-root DIR] [--profile DIR]
 *
 * The server runs compiled (`make build` first); `--agl-root DIR` runs another checkout's, for comparisons in turns;
 * `--profile DIR` writes the server processes' V8 CPU profiles there.
 */
import * as http from "node:http";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { type ServerProcess, startServerProcess } from "../../test/support/server-process.js";
import { percentile, processCpuSeconds } from "../stats.js";
import { messages } from "./calls.js";
import { startListening } from "./start-listening.js";

const { values: args } = parseArgs({
  options: {
    streams: { type: "string", default: "8" },
    tokens: { type: "string", default: "2000" },
    "chunk-ms": { type: "string", default: "1" },
    seconds: { type: "string", default: "20" },
    mode: { type: "string", default: "serve" },
    "agl-root": { type: "string" },
    profile: { type: "string" },
  },
});
const streams = Number(args.streams);
const tokens = Number(args.tokens);
const seconds = Number(args.seconds);
if (!(streams >= 1 && tokens >= 1 && seconds > 0)) throw new Error("--streams, --tokens and --seconds must be positive");
if (args.mode !== "serve" && args.mode !== "standalone") throw new Error("--mode is serve or standalone");
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

const ms = (value: number) => value.toFixed(2).padStart(7);

const agent = new http.Agent({ keepAlive: true });
/** POSTs JSON; calls `onData` at each piece of the answer as it arrives; resolves once it ended. */
const post = (url: string, body: object, onData: () => void = () => {}) =>
  new Promise<void>((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(
      url,
      { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`${url}: HTTP ${res.statusCode}`));
        res.on("data", onData);
        res.on("end", resolve);
      },
    );
    req.on("error", reject);
    req.end(text);
  });

const engine = await startListening(process.execPath, ["--import", "tsx", "bench/proxy/engine.ts"], {
  cwd: repoRoot,
  env: { ...process.env, TOKENS_PER_CHUNK: "1", CHUNK_DELAY_MS: args["chunk-ms"], ANSWER_CHARS: String(tokens) },
});
const processes: ServerProcess[] = [];
try {
  const options = {
    compiled: true,
    root: args["agl-root"],
    nodeArgs: args.profile ? ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${args.profile}`] : [],
  };
  const server = await startServerProcess(
    args.mode === "serve" ? ["--memory", "--proxy-backend", engine.url, "--proxy-model", "fake-model"] : ["--memory"],
    options,
  );
  processes.push(server);
  let proxyUrl = server.url;
  if (args.mode === "standalone") {
    const proxy = await startServerProcess(["--store", server.url, "--backend", engine.url, "--model", "fake-model"], {
      ...options,
      command: "proxy",
    });
    processes.push(proxy);
    proxyUrl = proxy.url;
  }
  const store = createStoreClient({ baseUrl: server.url });
  await store.enqueueRollouts({ rollouts: Array.from({ length: streams }, () => ({})) });
  const { rollouts } = await store.dequeueRollouts({ workerId: "bench", limit: streams });
  store.close();

  const probeBody = { model: "fake-model", messages, max_tokens: 1 };
  const probeUrl = `${proxyUrl}/v1/chat/completions`;
  // Warm-up: the server's code compiled on both paths before anything is measured.
  for (let i = 0; i < 200; i++) await post(probeUrl, probeBody);
  for (const rollout of rollouts.slice(0, 2))
    await post(`${proxyUrl}/rollout/${rollout.rolloutId}/attempt/${rollout.latestAttempt?.attemptId}/v1/chat/completions`, {
      model: "fake-model",
      messages,
      stream: true,
      max_tokens: Math.min(tokens, 200),
    });

  const pids = processes.map((p) => p.pid);
  const cpuNow = () => pids.reduce((sum, pid) => sum + processCpuSeconds(pid) * 1000, 0);
  const deadline = performance.now() + seconds * 1000;
  const gaps: number[] = [];
  let streamed = 0;
  /** One stream, its gaps noted. */
  const stream = async (url: string) => {
    let last: number | undefined;
    await post(url, { model: "fake-model", messages, stream: true, max_tokens: tokens }, () => {
      const now = performance.now();
      if (last !== undefined) gaps.push(now - last);
      last = now;
    });
    streamed++;
  };
  const streamer = async (url: string) => {
    while (performance.now() < deadline) await stream(url);
  };
  const probes: number[] = [];
  const probe = async () => {
    while (performance.now() < deadline) {
      const start = performance.now();
      await post(probeUrl, probeBody);
      probes.push(performance.now() - start);
    }
  };
  const urls = rollouts.map((r) => `${proxyUrl}/rollout/${r.rolloutId}/attempt/${r.latestAttempt?.attemptId}/v1/chat/completions`);
  await Promise.all([probe(), ...urls.map(streamer)]);
  const measuredGaps = gaps.splice(0);
  // Then three streams each without the probe, for the CPU a stream alone.
  const [streamsBefore, cpuBefore] = [streamed, cpuNow()];
  for (let round = 0; round < 3; round++) await Promise.all(urls.map(stream));
  const cpuAStream = (cpuNow() - cpuBefore) / (streamed - streamsBefore);

  console.log(
    `${args.mode === "serve" ? "agl serve --proxy-backend" : "agl proxy + agl serve"}${args["agl-root"] ? ` (${args["agl-root"]})` : ""}: ` +
      `${streams} streams of ${tokens} tokens, ${args["chunk-ms"]} ms apart, for ${seconds} s; ${streamsBefore} streams ended, ` +
      `${probes.length} probe calls`,
  );
  console.log(`                                  p50      p90      p99    p99.9      max  (ms)`);
  for (const [name, values] of [
    ["probe call, whole, one token", probes],
    ["gap between a stream's reads", measuredGaps],
  ] as const) {
    const sorted = [...values].sort((x, y) => x - y);
    console.log(`${name} ${[50, 90, 99, 99.9, 100].map((p) => ms(percentile(sorted, p))).join("  ")}`);
  }
  console.log(`proxy processes' CPU a stream, without the probe: ${cpuAStream.toFixed(1)} ms`);
} finally {
  agent.destroy();
  for (const p of processes.reverse()) await p.stop();
  engine.child.kill("SIGTERM");
}
