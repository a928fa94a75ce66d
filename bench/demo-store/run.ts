/**
 * The store's CPU per rollout on `make demo`'s workload: examples/rl-kind/agent.ts in a runner pool (`agl run`), its
 * calls through the standalone `agl proxy`, 8 tasks × 16 rollouts a step, against a SQLite `agl serve` started here
 * (through bin/agl.js, as `make demo` starts it). Prints the CPU seconds (user + system, from /proc) of the store and
 * of each other process per rollout, the wall time and the load average; CPU time depends far less than wall time on
 * what else the machine runs.
 *
 * Two trainers:
 * - `--trainer sim` (default): the trainer's store calls alone, made here as the local trainer makes them each step
 *   (publish the resources, enqueue the step's groups in one call, read the train rollouts' triplets from its cursor
 *   on a following stream while they run, wait for them), with the runner pool `agl train` starts (one worker thread,
 *   64 rollouts at once); the model a loopback engine (test/support/fake-vllm.ts) answering after `--engine-ms`,
 *   and `--update-ms` for the update. Light enough to run beside other work.
 * - `--trainer local`: `agl train --trainer local` itself (the tiny model, the policy server, GRPO), as `make demo`.
 *
 *   npx tsx bench/demo-store/run.ts [--steps 20] [--trainer sim|local]
 *   npx tsx bench/demo-store/run.ts --agl-root ../base        # another checkout's store, proxy, runners (and trainer)
 *   npx tsx bench/demo-store/run.ts --profile /tmp/prof        # the store's V8 CPU profile, written when it stops
 *   npx tsx bench/demo-store/run.ts --store-node-args=--perf-basic-prof   # Node/V8 flags of the store's process (with =)
 *   npx tsx bench/demo-store/run.ts --compare ../base [--rounds 2]   # this checkout against another, in turns
 *   npx tsx bench/demo-store/run.ts --work                   # also the store's allocations and promises a rollout
 *
 * `--compare DIR` runs the workload for this checkout and DIR (through each one's `bin/agl.js`), each run in a fresh
 * process, in ABBA order `--rounds` times, and prints each run, the range, mean and median of each checkout's store
 * CPU per rollout after the first step, and how many times DIR's mean is this checkout's: single runs spread by
 * ±10 % as the machine drifts, and an older checkout's runs more than that.
 *
 * `--work` counts what the store's process did over the whole run (store-work.mjs, preloaded): the bytes it allocated
 * and the promises it made, a rollout. These move with the machine's speed only as far as calls batch differently
 * (runs of one checkout spread by up to 3 %, against ±10 % for CPU time), so they show changes of a few per cent that CPU
 * figures cannot; the counting costs CPU of its own. With `--compare`, each run counts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { createStoreClient } from "../../src/client/store-client.js";
import { RolloutMode } from "../../src/gen/agl/v1/types_pb.js";
import { createTripletClient } from "../../src/triplets/triplet-client.js";
import { startFakeVllm } from "../../test/support/fake-vllm.js";
import { startServerProcess } from "../../test/support/server-process.js";
import { inTurns, printSummary, runInChild } from "../checkouts-in-turns.js";
import { mean, processCpuSeconds } from "../stats.js";

const { values: args } = parseArgs({
  options: {
    steps: { type: "string", default: "20" },
    trainer: { type: "string", default: "sim" },
    "engine-ms": { type: "string", default: "300" },
    "update-ms": { type: "string", default: "500" },
    seed: { type: "string", default: "0" },
    "agl-root": { type: "string" },
    profile: { type: "string" },
    "store-node-args": { type: "string", default: "" },
    keep: { type: "boolean", default: false },
    work: { type: "boolean", default: false },
    compare: { type: "string" },
    rounds: { type: "string", default: "2" },
    // One run's figures as a JSON line at the end (what `--compare` reads from each run).
    json: { type: "boolean", default: false },
  },
});
if (args.trainer !== "sim" && args.trainer !== "local") throw new Error("--trainer is sim or local");
if (args.compare !== undefined) {
  compareCheckouts(resolve(args.compare));
  process.exit(0);
}
const root = resolve(args["agl-root"] ?? new URL("../..", import.meta.url).pathname);
const cli = join(root, "bin/agl.js");
const dir = mkdtempSync(join(tmpdir(), "agl-bench-demo-store-"));
const steps = Number(args.steps);
const tasksPerStep = 8;
const n = 16;

/** CPU seconds (user + system) of a live process, from /proc; undefined once it is gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    return processCpuSeconds(pid);
  } catch {
    return undefined;
  }
}

/** CPU seconds (user, system) of each thread of a process, summed by thread name (V8's, libuv's, SQLite's worker). */
function threadCpu(pid: number): Map<string, { user: number; system: number }> {
  const byName = new Map<string, { user: number; system: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [name, rest] = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
        .split(/ \((.*)\) /)
        .slice(1);
      const fields = rest?.split(" ") ?? [];
      const seen = byName.get(name ?? "?") ?? { user: 0, system: 0 };
      byName.set(name ?? "?", { user: seen.user + Number(fields[11]) / 100, system: seen.system + Number(fields[12]) / 100 });
    } catch {}
  }
  return byName;
}

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** What a process of the run is, from its command line. */
function role(pid: number): string {
  let argv: string[] = [];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {}
  if (argv.includes("proxy")) return "proxy";
  if (argv.includes("run")) return "runner pool";
  if (argv.some((a) => a.startsWith("agl_bridge"))) return "trainer";
  if (argv.includes("train")) return "agl train";
  return argv.slice(0, 3).join(" ");
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(" ");
let stderr = "";
const capture = (child: ChildProcess) =>
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });

/** `agl train --trainer local` against the store started here: `make demo`'s run. */
function trainLocal(storeUrl: string): ChildProcess {
  const argv = ["train", "examples/rl-kind/agent.ts", "--store", storeUrl, "--trainer", "local", "--steps", String(steps)];
  argv.push("--tasks-per-step", String(tasksPerStep), "--n", String(n), "--checkpoint-dir", join(dir, "ckpt"), "--");
  argv.push("--seed", args.seed, "--lr", "7e-4", "--summary", join(dir, "summary.json"));
  const child = spawn(process.execPath, [cli, ...argv], { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
  capture(child);
  return child;
}

/** The local trainer's store calls, step by step, with the proxy and runner pool `agl train` would start. */
async function trainSim(storeUrl: string, started: (child: ChildProcess) => void): Promise<void> {
  const word = /kind of (\S+) \?/;
  const engine = await startFakeVllm({
    model: "agl-local-policy",
    latencyMs: Number(args["engine-ms"]),
    policy: ({ messages }) => ({ content: `${word.exec(String(messages.at(-1)?.content ?? ""))?.[1] ?? "?"} animal` }),
  });
  const proxy = await startServerProcess(["--store", storeUrl], { root, command: "proxy" });
  // As `agl train` starts it: one worker thread running 64 rollouts at once (`agl run` alone defaults to 8). On a busy
  // machine the agent's worker thread may wait for CPU a long while: starved, not blocked.
  const runnerArgs = ["run", "examples/rl-kind/agent.ts", "--store", storeUrl, "--workers", "1", "--concurrency", "64"];
  const runner = spawn(process.execPath, [cli, ...runnerArgs, "--blocked-worker-ms", "120000"], {
    cwd: root,
    stdio: ["ignore", "ignore", "pipe"],
  });
  capture(runner);
  started(proxy.child);
  started(runner);
  const client = createStoreClient({ baseUrl: storeUrl });
  const triplets = createTripletClient({ baseUrl: storeUrl });
  const llm = { model: engine.model, samplingParameters: { temperature: 1.0 } };
  let cursor = "";
  try {
    for (let step = 0; step < steps; step++) {
      await client.updateResources({
        resourcesId: "demo",
        createIfMissing: true,
        resources: {
          main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${proxy.url}/v1`, ...llm } } },
          policy: { kind: { case: "llm", value: { endpoint: engine.url, ...llm } } },
        },
      });
      const specs = Array.from({ length: tasksPerStep * n }, (_, i) => ({
        input: { word: `w${step}x${Math.floor(i / n)}`, answer: "animal" },
        mode: RolloutMode.TRAIN,
        groupId: `step${step}-group${Math.floor(i / n)}`,
        resourcesId: "demo",
        metadata: { step },
      }));
      const ids = (await client.enqueueRollouts({ rollouts: specs })).rollouts.map((r) => r.rolloutId);
      const abort = new AbortController();
      // As the local trainer reads them (agl_bridge's StreamTripletSource): the train rollouts from its cursor, until
      // every rollout of the step arrived.
      const reading = (async () => {
        const missing = new Set(ids);
        const request = { rolloutMode: RolloutMode.TRAIN, follow: true, cursor };
        for await (const message of triplets.streamTriplets(request, { signal: abort.signal })) {
          if (message.rollout) missing.delete(message.rollout.rolloutId);
          if (message.cursor) cursor = message.cursor;
          if (missing.size === 0) return;
        }
      })();
      await client.waitForRollouts({ rolloutIds: ids, timeoutSeconds: 600 });
      await reading;
      abort.abort();
      await new Promise((r) => setTimeout(r, Number(args["update-ms"])));
      process.stderr.write(`step ${step + 1}/${steps} done (${((performance.now() - startedAt) / 1000).toFixed(1)} s)\n`);
    }
  } finally {
    client.close();
    await proxy.stop();
    runner.kill("SIGTERM");
    await once(runner, "exit");
    await engine.close();
  }
}

const loadBefore = load();
const nodeArgs = [
  ...args["store-node-args"].split(" ").filter(Boolean),
  ...(args.profile ? ["--cpu-prof", "--cpu-prof-interval=500", `--cpu-prof-dir=${resolve(args.profile)}`] : []),
  ...(args.work ? [`--import=${new URL("./store-work.mjs", import.meta.url).href}`] : []),
];
const workFile = join(dir, "work.json");
const store = await startServerProcess(["--database", join(dir, "agl.db")], {
  root,
  nodeArgs,
  ...(args.work ? { env: { AGL_BENCH_WORK_OUT: workFile } } : {}),
});
const storeStart = cpuSeconds(store.pid) ?? 0;
const startedAt = performance.now();
// The last CPU reading of every other process of the run, and of theirs (sampled: each exits before the run ends).
const roots: ChildProcess[] = [];
const last = new Map<number, { role: string; cpu: number }>();
const sample = () => {
  const pending = roots.map((c) => c.pid as number);
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    const cpu = cpuSeconds(pid);
    if (cpu === undefined) continue;
    const seen = last.get(pid);
    last.set(pid, { role: seen?.role ?? role(pid), cpu });
    pending.push(...children(pid));
  }
};
// The first step is left out of the steady figure: the store's lazily loaded modules and its JIT warm up there.
const db = new Database(join(dir, "agl.db"), { readonly: true, fileMustExist: true });
const finishedCount = db.prepare("SELECT count(*) AS n FROM rollouts WHERE end_time IS NOT NULL");
let warm: { cpu: number; rollouts: number } | undefined;
const sampler = setInterval(() => {
  sample();
  if (warm) return;
  const finished = (finishedCount.get() as { n: number }).n;
  if (finished >= tasksPerStep * n) warm = { cpu: cpuSeconds(store.pid) ?? Number.NaN, rollouts: finished };
}, 100);
let code: number | null = 0;
try {
  if (args.trainer === "local") {
    const train = trainLocal(store.url);
    roots.push(train);
    [code] = (await once(train, "exit")) as [number | null];
  } else {
    await trainSim(store.url, (child) => roots.push(child));
  }
} finally {
  clearInterval(sampler);
}
const wall = (performance.now() - startedAt) / 1000;
const storeEnd = cpuSeconds(store.pid) ?? Number.NaN;
const storeThreads = threadCpu(store.pid);
const storeCpu = storeEnd - storeStart;
// What the store kept: the CPU figures of two checkouts compare only while they stored the same spans a rollout.
const spansByName = db.prepare("SELECT name, count(*) AS n FROM spans GROUP BY name ORDER BY name").all() as { name: string; n: number }[];
db.close();
const client = createStoreClient({ baseUrl: store.url });
const byStatus = (await client.getStatistics({})).rolloutsByStatus;
client.close();
await store.stop();
const rollouts = Object.values(byStatus).reduce((a, b) => a + b, 0);
if (code !== 0) console.error(`agl train exited with ${code}:\n${stderr.split("\n").slice(-15).join("\n")}`);

const perRollout = (cpu: number) => `${((cpu * 1000) / rollouts).toFixed(2)} ms`;
console.log(`demo workload, trainer ${args.trainer}: ${steps} steps × ${tasksPerStep} tasks × ${n} rollouts; ${root}`);
console.log(`rollouts: ${rollouts} (${JSON.stringify(byStatus)}), wall ${wall.toFixed(1)} s, load ${loadBefore} → ${load()}`);
const spansPerRollout = spansByName.reduce((sum, { n }) => sum + n, 0) / rollouts;
console.log(
  `spans: ${spansPerRollout.toFixed(2)} a rollout (${spansByName.map(({ name, n }) => `${name} ${(n / rollouts).toFixed(2)}`).join(", ")})`,
);
console.log(`store CPU: ${storeCpu.toFixed(2)} s, ${perRollout(storeCpu)} per rollout`);
const steadyMs = warm ? ((storeEnd - warm.cpu) * 1000) / (rollouts - warm.rollouts) : Number.NaN;
if (warm) console.log(`store CPU after the first step: ${steadyMs.toFixed(2)} ms per rollout (${rollouts - warm.rollouts} rollouts)`);
// Where the store's CPU went by thread (from its start): the JS thread is the process's own name.
const threads = [...storeThreads].sort((a, b) => b[1].user + b[1].system - (a[1].user + a[1].system));
console.log(
  `store threads (CPU s since start, user+system): ${threads
    .filter(([, t]) => t.user + t.system > 0)
    .map(([name, t]) => `${name} ${t.user.toFixed(2)}+${t.system.toFixed(2)}`)
    .join(", ")}`,
);
// The others' CPU from their start (the proxy's and runner pool's start-up included).
const byRole = new Map<string, number>();
for (const { role, cpu } of last.values()) byRole.set(role, (byRole.get(role) ?? 0) + cpu);
for (const [name, cpu] of byRole) console.log(`${name} CPU: ${cpu.toFixed(2)} s, ${perRollout(cpu)} per rollout (start-up included)`);
const work = args.work ? storeWork(workFile, rollouts) : undefined;
if (work)
  console.log(`store work (whole run): ${work.allocatedKb.toFixed(0)} KB allocated, ${work.promises.toFixed(0)} promises a rollout`);
if (args.json) console.log(JSON.stringify({ rollouts, steadyMs, spansPerRollout, work }));
if (!args.keep) rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir}`);

/** What store-work.mjs counted, a rollout. */
function storeWork(file: string, rollouts: number): { allocatedKb: number; promises: number } {
  if (!existsSync(file)) throw new Error(`--work: the store wrote no counts to ${file} (it did not exit normally)`);
  const counted = JSON.parse(readFileSync(file, "utf8")) as { allocatedBytes: number; promises: number };
  return { allocatedKb: counted.allocatedBytes / 1024 / rollouts, promises: counted.promises / rollouts };
}

/** `--compare`: this checkout and `base` in turns, each run a fresh process of this script. */
function compareCheckouts(base: string): void {
  if (Number(args.steps) < 2) throw new Error("--compare needs --steps 2 or more: its figure leaves the first step out");
  const here = resolve(fileURLToPath(new URL("../..", import.meta.url)));
  const forwarded = ["steps", "trainer", "engine-ms", "update-ms", "seed", "store-node-args"] as const;
  const byCheckout = () => new Map<string, number[]>([here, base].map((root) => [root, []]));
  // Each run's spans a rollout, and with --work its allocations and promises a rollout, by checkout.
  const spans = byCheckout();
  const allocated = byCheckout();
  const promises = byCheckout();
  const run = (checkout: string) => {
    const result = runInChild<{
      rollouts: number;
      steadyMs: number;
      spansPerRollout: number;
      work?: { allocatedKb: number; promises: number };
    }>(
      import.meta.url,
      ["--json", "--agl-root", checkout, ...forwarded.map((name) => `--${name}=${args[name]}`), ...(args.work ? ["--work"] : [])],
      here,
    );
    const { work } = result;
    console.log(
      `${checkout}: ${result.steadyMs.toFixed(2)} ms a rollout after the first step (${result.rollouts} rollouts, ` +
        `${result.spansPerRollout.toFixed(2)} spans each` +
        `${work ? `; ${work.allocatedKb.toFixed(0)} KB allocated, ${work.promises.toFixed(0)} promises a rollout` : ""})`,
    );
    spans.get(checkout)?.push(result.spansPerRollout);
    if (work) {
      allocated.get(checkout)?.push(work.allocatedKb);
      promises.get(checkout)?.push(work.promises);
    }
    return result;
  };
  const figures = inTurns([here, base], Number(args.rounds), run, (result) => result.steadyMs);
  printSummary(figures, "store CPU a rollout after the first step", "ms", 2);
  if (args.work) {
    printSummary(allocated, "store work a rollout", "KB allocated", 0);
    printSummary(promises, "store work a rollout", "promises", 0);
  }
  const ratio = mean(figures.get(base) ?? []) / mean(figures.get(here) ?? []);
  console.log(`${base} ÷ ${here}, means: ${ratio.toFixed(2)}×`);
  const spansHere = mean(spans.get(here) ?? []);
  const spansBase = mean(spans.get(base) ?? []);
  if (Math.abs(spansHere - spansBase) > 0.01) {
    console.log(
      `warning: the checkouts stored ${spansHere.toFixed(2)} and ${spansBase.toFixed(2)} spans a rollout: ` +
        "their CPU figures are not of the same work",
    );
  }
}
