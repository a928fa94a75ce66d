/**
 * The store's CPU per rollout on `make demo`'s workload: `agl train` of examples/rl-kind/agent.ts with the local
 * trainer, 8 tasks × 16 rollouts a step, against a SQLite `agl serve` started here (as `make demo` would start it,
 * through bin/agl.js), so that its process can be read. Prints the CPU seconds (user + system, from /proc) of the store
 * and of each other process of the run (the standalone proxy, the runner pool, the trainer) per rollout, the wall time
 * and the load average. CPU time depends far less than wall time on what else the machine runs.
 *
 *   npx tsx bench/demo-store/run.ts [--steps 20] [--seed 0]
 *   npx tsx bench/demo-store/run.ts --agl-root ../base        # another checkout's store, proxy, runners and trainer
 *   npx tsx bench/demo-store/run.ts --profile /tmp/prof        # the store's V8 CPU profile, written when it stops
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { startServerProcess } from "../../test/support/server-process.js";

const { values: args } = parseArgs({
  options: {
    steps: { type: "string", default: "20" },
    seed: { type: "string", default: "0" },
    "agl-root": { type: "string" },
    profile: { type: "string" },
    keep: { type: "boolean", default: false },
  },
});
const root = resolve(args["agl-root"] ?? new URL("../..", import.meta.url).pathname);
const dir = mkdtempSync(join(tmpdir(), "agl-bench-demo-store-"));

/** CPU seconds (user + system) of a live process, from /proc; undefined once it is gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
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
const loadBefore = load();
const nodeArgs = args.profile ? ["--cpu-prof", "--cpu-prof-interval=500", `--cpu-prof-dir=${resolve(args.profile)}`] : [];
const store = await startServerProcess(["--database", join(dir, "agl.db")], { root, nodeArgs });
const storeStart = cpuSeconds(store.pid) ?? 0;
const started = performance.now();
const train = spawn(
  process.execPath,
  [
    join(root, "bin/agl.js"),
    "train",
    "examples/rl-kind/agent.ts",
    "--store",
    store.url,
    "--trainer",
    "local",
    "--steps",
    args.steps,
    "--tasks-per-step",
    "8",
    "--n",
    "16",
    "--checkpoint-dir",
    join(dir, "ckpt"),
    "--",
    "--seed",
    args.seed,
    "--lr",
    "7e-4",
    "--summary",
    join(dir, "summary.json"),
  ],
  { cwd: root, stdio: ["ignore", "ignore", "pipe"] },
);
let stderr = "";
train.stderr?.on("data", (chunk: Buffer) => {
  stderr += chunk.toString();
});
// The last CPU reading of every process under `agl train` (each exits before the run's end, so it is sampled).
const last = new Map<number, { role: string; cpu: number }>();
const sample = () => {
  const pending = [train.pid as number];
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    const cpu = cpuSeconds(pid);
    if (cpu === undefined) continue;
    last.set(pid, { role: last.get(pid)?.role ?? role(pid), cpu });
    pending.push(...children(pid));
  }
};
const sampler = setInterval(sample, 100);
const [code] = (await once(train, "exit")) as [number | null];
clearInterval(sampler);
const wall = (performance.now() - started) / 1000;
const storeCpu = (cpuSeconds(store.pid) ?? Number.NaN) - storeStart;
const client = createStoreClient({ baseUrl: store.url });
const byStatus = (await client.getStatistics({})).rolloutsByStatus;
client.close();
await store.stop();
const rollouts = Object.values(byStatus).reduce((a, b) => a + b, 0);
if (code !== 0) console.error(`agl train exited with ${code}:\n${stderr.split("\n").slice(-15).join("\n")}`);

const perRollout = (cpu: number) => `${((cpu * 1000) / rollouts).toFixed(2)} ms`;
console.log(`demo workload: ${args.steps} steps × 8 tasks × 16 rollouts; ${root}`);
console.log(`rollouts: ${rollouts} (${JSON.stringify(byStatus)}), wall ${wall.toFixed(1)} s, load ${loadBefore} → ${load()}`);
console.log(`store CPU: ${storeCpu.toFixed(2)} s, ${perRollout(storeCpu)} per rollout`);
const byRole = new Map<string, number>();
for (const { role, cpu } of last.values()) byRole.set(role, (byRole.get(role) ?? 0) + cpu);
for (const [name, cpu] of byRole) console.log(`${name} CPU: ${cpu.toFixed(2)} s, ${perRollout(cpu)} per rollout`);
if (!args.keep) rmSync(dir, { recursive: true, force: true });
else console.log(`kept ${dir}`);
