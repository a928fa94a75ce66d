/**
 * Summarises a V8 CPU profile (`node --cpu-prof`, as `bench/store --profile` and `bench/proxy --profile` write):
 * the share of samples by self time per function and per source file, and the inclusive share of the functions whose
 * name matches --match (what a call costs with everything it calls).
 *
 *   npx tsx bench/profile/summary.ts FILE.cpuprofile [--top 25] [--match 'scanOnce|commit']
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "25" }, match: { type: "string" } },
});
const file = positionals[0];
if (!file) throw new Error("usage: summary.ts FILE.cpuprofile [--top N] [--match REGEX]");
const profile = JSON.parse(readFileSync(file, "utf8")) as { nodes: ProfileNode[]; samples: number[] };
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const selfCount = new Map<number, number>();
for (const s of profile.samples) selfCount.set(s, (selfCount.get(s) ?? 0) + 1);
const total = profile.samples.length;
const short = (url: string) => url.replace(/^.*\/(node_modules|dist|src)\//, "$1/").replace(/^file:\/\//, "") || "(native)";
const label = (n: ProfileNode) => `${n.callFrame.functionName || "(anonymous)"} ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

function tally(key: (n: ProfileNode) => string): [string, number][] {
  const out = new Map<string, number>();
  for (const [id, count] of selfCount) {
    const k = key(byId.get(id) as ProfileNode);
    out.set(k, (out.get(k) ?? 0) + count);
  }
  return [...out].sort((a, b) => b[1] - a[1]).slice(0, Number(args.top));
}
const pct = (count: number) => `${((100 * count) / total).toFixed(1).padStart(5)} %`;
const idle = tally((n) => n.callFrame.functionName).find(([k]) => k === "(idle)")?.[1] ?? 0;
console.log(`${total} samples, ${pct(idle)} idle`);
console.log("\nself time by function");
for (const [k, c] of tally(label)) console.log(`${pct(c)}  ${k}`);
console.log("\nself time by file");
for (const [k, c] of tally((n) => short(n.callFrame.url))) console.log(`${pct(c)}  ${k}`);
if (args.match) {
  // Inclusive: a sample counts once for each matching function on its stack.
  const re = new RegExp(args.match);
  const inclusive = new Map<string, number>();
  for (const [id, count] of selfCount) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const n = byId.get(at) as ProfileNode;
      if (re.test(n.callFrame.functionName) && !seen.has(label(n))) seen.add(label(n));
    }
    for (const k of seen) inclusive.set(k, (inclusive.get(k) ?? 0) + count);
  }
  console.log(`\ninclusive time of functions matching /${args.match}/`);
  for (const [k, c] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, Number(args.top))) console.log(`${pct(c)}  ${k}`);
}
