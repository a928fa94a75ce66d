/**
 * Agent Lightning v0.3's LLM proxy (LiteLLM, bench/vs-agl/agl03_proxy.py: its store server in process, the proxy in
 * a child process sending each call's spans over OTLP, as its trainer runs them) and
 * agl's (`agl serve --proxy-backend`, one process, and the standalone `agl proxy` + `agl serve`; bench/proxy/run.ts),
 * side by side in one sitting, in front of one loopback engine (bench/proxy/engine.ts, the fake vLLM), alternating
 * rounds. Each figure is the p50 latency a proxy adds over a direct call to the engine, for an attempt-scoped call,
 * whole and streamed, with the proxy processes' CPU per call; the direct and proxied calls are measured in turns.
 * `--base DIR` adds agl's rows run by another checkout's compiled CLI (say the previous main).
 *
 *   npx tsx bench/vs-agl/proxy.ts [--rounds 3] [--requests 1000] [--agl03-requests 300] [--base ../perf-base]
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import * as http from "node:http";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startListening as startListeningIn } from "../proxy/start-listening.js";
import { freePort, pythonEnv, treeCpu } from "./agl03-store.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    requests: { type: "string", default: "1000" },
    "agl03-requests": { type: "string", default: "300" },
    warmup: { type: "string", default: "300" },
    base: { type: "string" },
  },
});
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const venv = `${repoRoot}${execFileSync(`${repoRoot}bench/vs-agl/setup.sh`, ["proxy"], { encoding: "utf8" }).trim()}`;

const startListening = (command: string, argv: string[], env: NodeJS.ProcessEnv) => startListeningIn(command, argv, { cwd: repoRoot, env });
/** SIGTERM (AGL's script then stops its proxy's process and its store), SIGKILL if it has not exited within 20 s. */
const stop = (child: ChildProcess) =>
  new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(undefined);
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.once("exit", () => resolve(clearTimeout(timer)));
    child.kill("SIGTERM");
  });

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function post(url: string, body: string): Promise<{ ms: number; text: string }> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = http.request(
      url,
      { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200 && res.statusCode !== 201) reject(new Error(`${url}: ${res.statusCode} ${text.slice(0, 500)}`));
          else resolve({ ms: performance.now() - start, text });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

// The same request bodies as bench/proxy/run.ts: ~800 prompt tokens, ~85 response tokens.
const messages = [
  { role: "system", content: "You are a helpful assistant. ".repeat(20) },
  { role: "user", content: "Tell me about foxes. ".repeat(10) },
];
const body = (stream: boolean, engine: boolean) =>
  JSON.stringify({ model: "fake-model", messages, stream, ...(engine ? { return_token_ids: true, logprobs: true } : {}) });

interface Added {
  whole: number;
  streamed: number;
  /** Proxy (and store) processes' CPU per proxied call, ms. */
  cpuMs: number;
}

/** AGL v0.3: its store server and its LLM proxy, an attempt-scoped call alternating with a direct one. */
async function agl03(engineUrl: string): Promise<Added> {
  const storePort = await freePort();
  const storeUrl = `http://127.0.0.1:${storePort}`;
  const started = await startListening(
    `${venv}/bin/python`,
    ["bench/vs-agl/agl03_proxy.py", "--engine", engineUrl, "--port", String(await freePort()), "--store-port", String(storePort)],
    // Newer LiteLLM refuses to start without a master key; this one listens on loopback only, for the benchmark.
    { ...pythonEnv, LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY: "true" },
  );
  try {
    await post(`${storeUrl}/v1/agl/queues/rollouts/enqueue`, JSON.stringify({ rollouts: [{ input: {} }] }));
    const [claimed] = JSON.parse((await post(`${storeUrl}/v1/agl/queues/rollouts/dequeue`, JSON.stringify({ limit: 1 }))).text);
    const scoped = `${started.url}/rollout/${claimed.rollout_id}/attempt/${claimed.attempt.attempt_id}/v1/chat/completions`;
    const requests = Number(args["agl03-requests"]);
    // The store server's process and the proxy's, its child.
    const cpu = () => treeCpu(started.child.pid as number);
    const added: Record<string, number> = {};
    let proxiedCpu = 0;
    for (const stream of [false, true]) {
      for (let i = 0; i < Math.min(Number(args.warmup), requests); i++) await post(scoped, body(stream, false));
      const direct: number[] = [];
      const proxied: number[] = [];
      for (let i = 0; i < requests; i++) {
        direct.push((await post(`${engineUrl}/chat/completions`, body(stream, true))).ms);
        const before = cpu();
        proxied.push((await post(scoped, body(stream, false))).ms);
        proxiedCpu += cpu() - before;
      }
      added[stream ? "streamed" : "whole"] = p50(proxied) - p50(direct);
    }
    const spans = JSON.parse((await post(`${storeUrl}/v1/agl/spans/search`, JSON.stringify({ rollout_id: claimed.rollout_id }))).text);
    process.stderr.write(`AGL v0.3: ${spans.total} spans stored for the scoped calls\n`);
    return { whole: added.whole as number, streamed: added.streamed as number, cpuMs: (proxiedCpu / (2 * requests)) * 1000 };
  } finally {
    await stop(started.child);
  }
}

/** agl: bench/proxy/run.ts, both deployments, against this engine; `root` runs another checkout's CLI. */
async function agl(engineUrl: string, root: string | undefined): Promise<Record<"serve" | "standalone", Added>> {
  const argv = ["--import", "tsx", "bench/proxy/run.ts", "--compiled", "--engine", engineUrl];
  argv.push("--requests", args.requests as string, "--warmup", args.warmup as string, ...(root ? ["--agl-root", root] : []));
  const out = execFileSync(process.execPath, argv, { cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const [serve, standalone] = out.split("agl proxy (own process)");
  const parse = (text = ""): Added => ({
    whole: Number(/added by the proxy \((?:chat, )?whole\): p50 (\S+) ms/.exec(text)?.[1]),
    streamed: Number(/added by the proxy \((?:chat, )?streamed\): p50 (\S+) ms/.exec(text)?.[1]),
    // The scoped rows' CPU per call, whole and streamed averaged.
    cpuMs:
      [...text.matchAll(/^proxy, (?:whole|streamed)\s+\S+\s+\S+\s+\S+\s+(\S+)/gm)].map((m) => Number(m[1])).reduce((a, b) => a + b, 0) / 2,
  });
  return { serve: parse(serve), standalone: parse(standalone) };
}

const engine = await startListening(process.execPath, ["--import", "tsx", "bench/proxy/engine.ts"], process.env);
const engineUrl = engine.url;
const results = new Map<string, Added[]>();
const loads: number[] = [];
const record = (name: string, added: Added) => {
  results.set(name, [...(results.get(name) ?? []), added]);
  console.log(
    `${name.padEnd(44)} +${added.whole.toFixed(2)} ms whole, +${added.streamed.toFixed(2)} ms streamed, ` +
      `${added.cpuMs.toFixed(3)} ms CPU/call  (load ${loadavg()[0]?.toFixed(1)})`,
  );
};
try {
  for (let round = 0; round < Number(args.rounds); round++) {
    loads.push(loadavg()[0] as number);
    record("AGL v0.3 LLMProxy (LiteLLM) + its store server", await agl03(engineUrl));
    for (const [label, root] of [["agl", undefined], ...(args.base ? [["main", args.base]] : [])] as const) {
      const { serve, standalone } = await agl(engineUrl, root);
      record(`${label}: agl serve --proxy-backend`, serve);
      record(`${label}: agl proxy + agl serve`, standalone);
    }
  }
} finally {
  await stop(engine.child);
  agent.destroy();
}

const range = (xs: number[], digits: number) => {
  const lo = Math.min(...xs).toFixed(digits);
  const hi = Math.max(...xs).toFixed(digits);
  return lo === hi ? lo : `${lo}–${hi}`;
};
console.log(
  `\nadded p50 over a direct call, attempt-scoped calls; agl ${args.requests} calls a row, AGL v0.3 ${args["agl03-requests"]}; ` +
    `${args.rounds} rounds alternating; ${cpus().length} cores, 1-min load average ${range(loads, 1)}`,
);
console.log("| proxy | added p50, whole | added p50, streamed | proxy CPU per call |");
console.log("|---|---|---|---|");
for (const [name, list] of results) {
  console.log(
    `| ${name} | +${range(
      list.map((a) => a.whole),
      2,
    )} ms | +${range(
      list.map((a) => a.streamed),
      2,
    )} ms | ` +
      `${range(
        list.map((a) => a.cpuMs),
        3,
      )} ms |`,
  );
}
