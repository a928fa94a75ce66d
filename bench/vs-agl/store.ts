/**
 * Agent Lightning v0.3's store and agl's, side by side in one sitting, on one workload (N rollouts × 10 spans of
 * ~1 KB, 32 runners), alternating: each round runs every configuration once, so drift and other load on the machine
 * hit them alike. Configurations:
 * - AGL v0.3, in-memory `agl store`: a POST per span (its runner's path), and one OTLP batch per rollout (its best
 *   path) — bench/vs-agl/agl03-store.ts;
 * - agl (`bench/store/run.ts`, the compiled server), memory and SQLite, with its default call shape (claims of up to 4
 *   rollouts, spans in batches of 5 with the last riding on UpdateAttempt) and AGL's (`--dequeue-batch 1`);
 * - with `--base DIR`, the same agl rows run by another checkout's compiled server (say the previous main), each next
 *   to its twin, the two in turns from round to round.
 * Prints each run, then each configuration's range and its ratio to AGL's best path in the same round (range and
 * median).
 *
 *   npx tsx bench/vs-agl/store.ts [--rounds 3] [--rollouts 2000] [--agl03-rollouts 2000] [--base ../perf-base]
 *                                 [--only REGEX]
 */
import { execFileSync, spawn } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { assertBuilt } from "../../test/support/server-process.js";
import { median } from "../stats.js";
import { runAgl03Store, type StoreFigures } from "./agl03-store.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    rollouts: { type: "string", default: "2000" },
    "agl03-rollouts": { type: "string" },
    warmup: { type: "string", default: "500" },
    runners: { type: "string", default: "32" },
    base: { type: "string" },
    only: { type: "string" },
  },
});
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const rollouts = Number(args.rollouts);
const runners = Number(args.runners);
const warmup = Number(args.warmup);
// The agl rows run each checkout's compiled server: refuse a stale one now, not after AGL's runs of the first round.
for (const root of [repoRoot, ...(args.base ? [args.base] : [])]) assertBuilt(root);
const venv = `${repoRoot}${execFileSync(`${repoRoot}bench/vs-agl/setup.sh`, ["store"], { encoding: "utf8" }).trim()}`;

/** Runs bench/store/run.ts (this checkout's load generator) against `root`'s compiled server. */
function aglStore(root: string | undefined, backend: string, extra: string[]): Promise<StoreFigures> {
  const argv = ["--import", "tsx", "bench/store/run.ts", "--backend", backend, "--runners", String(runners)];
  argv.push("--rollouts", String(rollouts), "--warmup", String(warmup), ...(root ? ["--agl-root", root] : []), ...extra);
  const child = spawn(process.execPath, argv, { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return new Promise((resolve, reject) =>
    child.once("exit", (code) => {
      const num = (re: RegExp) => Number(re.exec(out)?.[1]);
      if (code !== 0) return reject(new Error(`bench/store exited with ${code}:\n${out}`));
      resolve({
        rolloutsPerSecond: num(/rollouts\/s: (\d+)/),
        cpuMsPerRollout: num(/CPU per rollout: server (\S+) ms/),
        peakRssMiB: num(/server peak RSS: (\d+)/),
      });
    }),
  );
}

interface Config {
  name: string;
  run: () => Promise<StoreFigures>;
}
const aglRows = (label: string, root: string | undefined): Config[] =>
  (["memory", "sqlite"] as const).flatMap((backend) => [
    { name: `${label} ${backend}, default calls`, run: () => aglStore(root, backend, []) },
    { name: `${label} ${backend}, AGL-shaped calls`, run: () => aglStore(root, backend, ["--dequeue-batch", "1", "--span-batch", "5"]) },
  ]);
const agl03Rollouts = Number(args["agl03-rollouts"] ?? rollouts);
const agl03 = (mode: "per-span" | "batch"): Config => ({
  name: `AGL v0.3 memory, ${mode === "batch" ? "one OTLP batch per rollout" : "a POST per span"}`,
  run: () =>
    runAgl03Store({
      venv,
      mode,
      runners,
      rollouts: agl03Rollouts,
      warmup: Math.min(warmup, agl03Rollouts / 4),
      spans: 10,
      spanBytes: 1024,
    }),
});
const BEST = agl03("batch").name;
// Each agl row runs next to its twin from --base, the two in turns (this checkout first in odd rounds, the base in
// even ones), so that drift within a round does not favour either.
const own = aglRows("agl", undefined);
const base = args.base ? aglRows("main", args.base) : [];
const twins = own.map((config, i) => [config, ...(base[i] ? [base[i]] : [])]);
const wanted = (c: Config) => c.name === BEST || !args.only || new RegExp(args.only).test(c.name);
const configsOf = (round: number) =>
  [agl03("per-span"), agl03("batch"), ...twins.flatMap((pair) => (round % 2 === 0 ? pair : [...pair].reverse()))].filter(wanted);

const results = new Map<string, StoreFigures[]>();
for (const config of configsOf(0)) results.set(config.name, []);
const loads: number[] = [];
for (let round = 0; round < Number(args.rounds); round++) {
  for (const config of configsOf(round)) {
    loads.push(loadavg()[0] as number);
    const figures = await config.run();
    results.get(config.name)?.push(figures);
    console.log(
      `round ${round + 1}  ${config.name.padEnd(44)} ${figures.rolloutsPerSecond.toFixed(1).padStart(8)} rollouts/s  ` +
        `${figures.cpuMsPerRollout.toFixed(3)} ms server CPU/rollout  ${figures.peakRssMiB.toFixed(0)} MiB  (load ${loadavg()[0]?.toFixed(1)})`,
    );
  }
}

const range = (xs: number[], digits: number) => {
  const lo = Math.min(...xs).toFixed(digits);
  const hi = Math.max(...xs).toFixed(digits);
  return lo === hi ? lo : `${lo}–${hi}`;
};
const best = results.get(BEST) ?? [];
console.log(
  `\n${rollouts} rollouts (AGL v0.3: ${agl03Rollouts}) × 10 spans of 1 KB, ${runners} runners, ${args.rounds} rounds alternating; ` +
    `${cpus().length} cores, 1-min load average ${range(loads, 1)} during the sitting`,
);
console.log("| configuration | rollouts/s | server CPU per rollout | peak RSS | × AGL v0.3's best path (same round), median |");
console.log("|---|---|---|---|---|");
for (const [name, list] of results) {
  const ratios = list.map((f, i) => f.rolloutsPerSecond / (best[i]?.rolloutsPerSecond ?? Number.NaN));
  console.log(
    `| ${name} | ${range(
      list.map((f) => f.rolloutsPerSecond),
      0,
    )} | ${range(
      list.map((f) => f.cpuMsPerRollout),
      2,
    )} ms | ` +
      `${range(
        list.map((f) => f.peakRssMiB),
        0,
      )} MiB | ${range(ratios, 1)}×, ${median(ratios).toFixed(1)}× |`,
  );
}
