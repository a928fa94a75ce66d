/**
 * LLM proxy overhead: the same chat completion sent straight to the engine and through the proxy, one at a time
 * (latency, not throughput), streamed and not, for both deployments:
 * - `serve`: `agl serve --memory --proxy-backend …` (store, triplets and proxy on one port, one process);
 * - `standalone`: `agl serve --memory` plus `agl proxy --store … --backend …` (the proxy in its own process, talking
 *   to the store over gRPC).
 * The engine (the fake vLLM) is its own process. Through the proxy the calls are attempt-scoped: checked, and each
 * stores its span (ids, logprobs, bodies) right after its answer, the store holding the attempt's updates until then;
 * unattributed calls store nothing. The same conversation also goes through the proxy as a Responses and as an
 * Anthropic Messages call (translated onto the engine's chat completions and back). Prints p50/p90/p99 and the server
 * processes' CPU time per call for each path (standalone: also the store's and the proxy's each; the bare forwarder's
 * rows: its own process's), and the p50 the proxy adds per API.
 *
 * The floor: the same calls also go through a bare forwarder (bench/proxy/bare-forwarder.ts, its own process), which
 * passes each body to the engine and the answer back with nothing else; what it adds over a direct call is the cost
 * of one more hop through Node on this machine, which no proxy in Node can go under.
 *
 *   npx tsx bench/proxy/run.ts --requests 2000 [--mode serve|standalone|both] [--spans-first] [--compiled]
 *                              [--backend memory|sqlite] [--profile DIR] [--only REGEX]
 *
 * `--engine-ms N` makes the engine wait N ms before answering, like a real one: the standalone proxy promises each
 * span while the engine works, so that wait hides the promise's round trip.
 * `--spans-first` runs the standalone proxy with `--spans-first` (each span stored before its answer ends: the
 * behaviour before span promises), for comparison.
 *
 * `--profile DIR` writes V8 CPU profiles of the server processes there (open them in Chrome DevTools or speedscope);
 * `--only REGEX` runs only the rows whose name matches (say `^proxy, whole` to profile that path alone).
 * `--engine URL` uses an engine already running (its OpenAI base URL, ending in /v1) rather than starting one;
 * `--agl-root DIR` runs the compiled CLI of another checkout (say the previous main), for side-by-side comparisons.
 * `--compare DIR` runs another checkout's deployment beside this one's in the same run, its rows (named `… (compare)`)
 * measured in the same turns as the others: two builds compared with the machine's drift hitting both alike, which
 * runs one after the other cannot give (their p50s move by 0.05–0.1 ms between runs of one build here). The
 * deployment started second has measured up to 0.1 ms faster p50 whichever build it ran: run both orders
 * (`--agl-root A --compare B`, then `--agl-root B --compare A`) and average.
 * The rows are measured in turns of `--block` calls each (default 50), so that drift on a shared machine hits every
 * row alike, each turn starting one row later than the one before.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../../test/support/server-process.js";
import { percentile } from "../stats.js";
import { chatBodies, createPoster, messages } from "./calls.js";
import { startListening } from "./start-listening.js";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "2000" },
    warmup: { type: "string", default: "1000" },
    compiled: { type: "boolean", default: false },
    backend: { type: "string", default: "memory" },
    profile: { type: "string" },
    only: { type: "string" },
    mode: { type: "string", default: "both" },
    "spans-first": { type: "boolean", default: false },
    "engine-ms": { type: "string", default: "0" },
    engine: { type: "string" },
    "agl-root": { type: "string" },
    compare: { type: "string" },
    block: { type: "string", default: "50" },
  },
});
const requests = Number(args.requests);
const warmup = Number(args.warmup);
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

const startEngine = () =>
  startListening(process.execPath, ["--import", "tsx", "bench/proxy/engine.ts"], {
    cwd: repoRoot,
    env: { ...process.env, ENGINE_LATENCY_MS: args["engine-ms"] },
  });

const startBareForwarder = (engineUrl: string) =>
  startListening(process.execPath, ["--import", "tsx", "bench/proxy/bare-forwarder.ts"], {
    cwd: repoRoot,
    env: { ...process.env, ENGINE_URL: engineUrl },
  });

const poster = createPoster();
/** POSTs and reads the whole answer; resolves to milliseconds. */
const timedPost = async (url: string, body: string) => {
  const { start, end } = await poster.post(url, body);
  return (end - start) / 1000;
};

/** CPU time (all threads) a process has used so far, user and system, in ms; NaN where /proc is not there. */
function cpuMs(pid: number): { user: number; system: number } {
  try {
    // Fields 14 and 15 (utime, stime) after the parenthesized command name, in clock ticks of 10 ms.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
      .replace(/^.*\) /s, "")
      .split(" ");
    return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10 };
  } catch {
    return { user: Number.NaN, system: Number.NaN };
  }
}

interface Series {
  sorted: number[];
  user: number;
  system: number;
  /** User + system per call, per process the path goes through (in `pids` order). */
  byProcess: number[];
}

/**
 * Latencies, sorted, and the CPU time per call (steadier than latency on a shared machine) of the processes each path
 * goes through (`pids`: agl's, or the bare forwarder's), measured in turns of `block` calls per path.
 */
async function measureAll(paths: { url: string; body: string; pids: number[] }[]): Promise<Series[]> {
  const out = paths.map((path): Series => ({ sorted: [], user: 0, system: 0, byProcess: path.pids.map(() => 0) }));
  const block = Number(args.block);
  for (let done = 0, turn = 0; done < requests; done += block, turn++) {
    // Each turn starts one path later, so that no path always runs right after the same one.
    for (let place = 0; place < paths.length; place++) {
      const i = (turn + place) % paths.length;
      const { url, body, pids } = paths[i] as (typeof paths)[number];
      const series = out[i] as Series;
      const before = pids.map(cpuMs);
      for (let k = 0; k < Math.min(block, requests - done); k++) series.sorted.push(await timedPost(url, body));
      for (const [j, pid] of pids.entries()) {
        const [was, now] = [before[j] as ReturnType<typeof cpuMs>, cpuMs(pid)];
        series.user += now.user - was.user;
        series.system += now.system - was.system;
        series.byProcess[j] = (series.byProcess[j] as number) + now.user - was.user + now.system - was.system;
      }
    }
  }
  for (const series of out) {
    series.sorted.sort((a, b) => a - b);
    series.user /= requests;
    series.system /= requests;
    series.byProcess = series.byProcess.map((ms) => ms / requests);
  }
  return out;
}

type Row = [string, Series];

const engine = args.engine ? { url: args.engine, child: undefined } : await startEngine();
const bare = await startBareForwarder(engine.url).catch((error: unknown) => {
  engine.child?.kill("SIGTERM");
  throw error;
});
const dir = mkdtempSync(join(tmpdir(), "agl-bench-proxy-"));
const processOptions = (name: string, root: string | undefined) => ({
  compiled: args.compiled,
  root,
  nodeArgs: args.profile ? ["--cpu-prof", "--cpu-prof-interval=100", `--cpu-prof-dir=${join(args.profile, name)}`] : [],
});

/** The checkouts measured: this one (or `--agl-root`), and `--compare`'s, whose rows are named with this suffix. */
const checkouts = [{ root: args["agl-root"], suffix: "" }, ...(args.compare ? [{ root: args.compare, suffix: " (compare)" }] : [])];

/** One checkout's deployment: its processes, its proxy, and an attempt for the scoped calls. */
interface Deployment {
  suffix: string;
  processes: ServerProcess[];
  store: ReturnType<typeof createStoreClient> | undefined;
  proxyUrl: string;
  scope: { rolloutId: string; attemptId: string };
}

const pidsOf = (deployment: Deployment) => deployment.processes.map((p) => p.pid);

/** Starts a checkout's deployment; what it started is in `processes` even when it fails. */
async function deploy(mode: "serve" | "standalone", { root, suffix }: (typeof checkouts)[number], into: Deployment[]): Promise<void> {
  const name = `${mode}${suffix ? "-compare" : ""}`;
  const deployment: Deployment = { suffix, processes: [], store: undefined, proxyUrl: "", scope: { rolloutId: "", attemptId: "" } };
  into.push(deployment);
  const storage = args.backend === "sqlite" ? ["--database", join(dir, `${name}.db`)] : ["--memory"];
  const server = await startServerProcess(
    mode === "serve" ? [...storage, "--proxy-backend", engine.url, "--proxy-model", "fake-model"] : storage,
    processOptions(`${name}-store`, root),
  );
  deployment.processes.push(server);
  deployment.proxyUrl = server.url;
  if (mode === "standalone") {
    const fixed = ["--store", server.url, "--backend", engine.url, "--model", "fake-model"];
    const proxy = await startServerProcess([...fixed, ...(args["spans-first"] ? ["--spans-first"] : [])], {
      ...processOptions(`${name}-proxy`, root),
      command: "proxy",
    });
    deployment.processes.push(proxy);
    deployment.proxyUrl = proxy.url;
  }
  deployment.store = createStoreClient({ baseUrl: server.url });
  await deployment.store.enqueueRollouts({ rollouts: [{}] });
  const [rollout] = (await deployment.store.dequeueRollouts({ workerId: "bench" })).rollouts;
  deployment.scope = { rolloutId: rollout?.rolloutId ?? "", attemptId: rollout?.latestAttempt?.attemptId ?? "" };
}

/** Starts one deployment (of each checkout), measures every row through it, stops it. */
async function measure(mode: "serve" | "standalone"): Promise<{ rows: Row[]; spans: (number | undefined)[] }> {
  const deployments: Deployment[] = [];
  try {
    for (const checkout of checkouts) await deploy(mode, checkout, deployments);
    const bareOnly = [bare.child.pid as number];
    const paths = [false, true]
      .flatMap((stream) => {
        const { client: clientBody, engine: engineBody } = chatBodies(stream);
        const kind = stream ? "streamed" : "whole";
        const [system, user] = [messages[0]?.content ?? "", messages[1]?.content ?? ""];
        const responsesBody = JSON.stringify({ model: "fake-model", instructions: system, input: user, stream });
        const messagesBody = JSON.stringify({
          model: "fake-model",
          system,
          messages: [{ role: "user", content: user }],
          max_tokens: 1024,
          stream,
        });
        const [first] = deployments as [Deployment];
        return [
          { name: `direct, ${kind}`, url: `${engine.url}/chat/completions`, body: engineBody, pids: pidsOf(first) },
          { name: `bare forwarder, ${kind}`, url: `${bare.url}/chat/completions`, body: engineBody, pids: bareOnly },
          ...deployments.flatMap((d) => {
            const scoped = `${d.proxyUrl}/rollout/${d.scope.rolloutId}/attempt/${d.scope.attemptId}/v1`;
            const pids = pidsOf(d);
            return [
              { name: `proxy, ${kind}${d.suffix}`, url: `${scoped}/chat/completions`, body: clientBody, pids },
              { name: `proxy unattributed, ${kind}${d.suffix}`, url: `${d.proxyUrl}/v1/chat/completions`, body: clientBody, pids },
              { name: `proxy responses, ${kind}${d.suffix}`, url: `${scoped}/responses`, body: responsesBody, pids },
              { name: `proxy messages, ${kind}${d.suffix}`, url: `${scoped}/messages`, body: messagesBody, pids },
            ];
          }),
        ];
      })
      .filter((path) => !args.only || new RegExp(args.only).test(path.name));
    // Every path is warmed up before any is measured: otherwise the first proxied row pays for compiling the
    // server's code and growing its heap (measured: about 0.1 ms of server CPU per call, and the latency with it).
    for (const path of paths) for (let i = 0; i < warmup; i++) await timedPost(path.url, path.body);
    const measured = await measureAll(paths);
    const rows = paths.map((path, i): Row => [path.name, measured[i] as Series]);
    // Finishing the attempt waits for the spans the standalone proxy promised and has yet to store (a read does not),
    // so that the count has every call's span.
    const spans = [];
    for (const { store, scope } of deployments) {
      await store?.updateAttempt({ ...scope, status: AttemptStatus.SUCCEEDED });
      spans.push((await store?.querySpans({ rolloutId: scope.rolloutId, page: { limit: 0 } }))?.page?.total);
    }
    return { rows, spans };
  } finally {
    for (const { store, processes } of deployments.reverse()) {
      store?.close();
      for (const p of processes.reverse()) await p.stop();
    }
  }
}

const modes = args.mode === "both" ? (["serve", "standalone"] as const) : [args.mode as "serve" | "standalone"];
const results: [string, Awaited<ReturnType<typeof measure>>][] = [];
try {
  for (const mode of modes) results.push([mode, await measure(mode)]);
} finally {
  engine.child?.kill("SIGTERM");
  bare.child.kill("SIGTERM");
  poster.close();
  rmSync(dir, { recursive: true, force: true });
}

console.log(
  `${requests} sequential calls per row (after ${warmup} warm-up calls of every row), ~800 prompt and ~85 response tokens, engine ` +
    `latency ${args["engine-ms"]} ms, ${args.compiled ? "compiled" : "tsx"} processes, ${args.backend} store`,
);
for (const [mode, { rows, spans }] of results) {
  const title =
    mode === "serve"
      ? "agl serve --proxy-backend (one process)"
      : `agl proxy${args["spans-first"] ? " --spans-first" : ""} (own process) + agl serve`;
  console.log(`\n${title}`);
  const split = mode === "standalone" ? ", store + proxy process" : "";
  console.log(`path                                          p50 ms   p90 ms   p99 ms   server CPU ms/call (user + system${split})`);
  for (const [name, { sorted, user, system, byProcess }] of rows) {
    const bareRow = name.startsWith("bare forwarder");
    const perProcess = split && !bareRow ? `; ${byProcess.map((ms) => ms.toFixed(3)).join(" + ")}` : "";
    const cpu = `${(user + system).toFixed(3)} (${user.toFixed(3)} + ${system.toFixed(3)}${perProcess})${bareRow ? ", its own process" : ""}`;
    console.log(`${name.padEnd(44)} ${[50, 90, 99].map((p) => percentile(sorted, p).toFixed(3).padStart(8)).join(" ")}   ${cpu}`);
  }
  for (const kind of ["whole", "streamed"]) {
    const direct = rows.find(([n]) => n === `direct, ${kind}`)?.[1].sorted;
    const floor = rows.find(([n]) => n === `bare forwarder, ${kind}`)?.[1].sorted;
    if (direct && floor) {
      console.log(
        `added by a bare forwarder (${kind}): p50 ${(percentile(floor, 50) - percentile(direct, 50)).toFixed(3)} ms, p99 ` +
          `${(percentile(floor, 99) - percentile(direct, 99)).toFixed(3)} ms`,
      );
    }
    for (const { suffix } of checkouts) {
      for (const api of ["chat", "responses", "messages"]) {
        const name = api === "chat" ? `proxy, ${kind}${suffix}` : `proxy ${api}, ${kind}${suffix}`;
        const proxied = rows.find(([n]) => n === name)?.[1].sorted;
        if (!direct || !proxied) continue;
        console.log(
          `added by the proxy (${api}, ${kind})${suffix}: p50 ${(percentile(proxied, 50) - percentile(direct, 50)).toFixed(3)} ms, ` +
            `p99 ${(percentile(proxied, 99) - percentile(direct, 99)).toFixed(3)} ms`,
        );
      }
    }
  }
  console.log(`spans stored for the scoped calls: ${spans.join(", ")}`);
}
