/**
 * Latency bench (root: network namespaces): the multi-host topology (`test/support/topology.ts`: a store host, two
 * runner hosts, a trainer host, TLS, scoped tokens) trained for a few steps with the trainer talking to the store
 * directly, then through a delaying TCP relay adding a round trip of `--rtt-ms` (default 20) on that link. Prints, per
 * setting, the median step time and its parts from the trainer's history: waiting for the rollouts, the update, and
 * the bridge (enqueue + collect + convert + publish: what crosses the trainer's link), and the 1-minute load average
 * at the end of the run.
 *
 *   npx tsx bench/multi-host/run.ts [--steps 12] [--rtt-ms 20]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startDelayRelay } from "../../test/support/delay-relay.js";
import { startTopology } from "../../test/support/topology.js";
import { median } from "../stats.js";

const { values } = parseArgs({ options: { steps: { type: "string" }, "rtt-ms": { type: "string" } } });
const steps = Number(values.steps ?? 12);
const rttMs = Number(values["rtt-ms"] ?? 20);
// The first steps warm up (JIT, connections, the policy's first batches): left out of the medians.
const skip = 2;

async function run(delayed: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "agl-bench-multi-host-"));
  let relay: Awaited<ReturnType<typeof startDelayRelay>> | undefined;
  const topology = await startTopology({
    dir,
    steps,
    tasksPerStep: 8,
    n: 16,
    // The relay runs here, on this host's end of the switch; the store's certificate names that address too.
    trainerStoreUrl: delayed
      ? async (storeUrl, lan) => {
          const url = new URL(storeUrl);
          relay = await startDelayRelay({
            host: lan.observerAddress,
            target: { host: url.hostname, port: Number(url.port) },
            oneWayMs: rttMs / 2,
          });
          return `https://${relay.host}:${relay.port}`;
        }
      : undefined,
  });
  try {
    const code = await topology.trainer.exited;
    if (code !== 0) throw new Error(`the trainer exited with ${code}\n${topology.logs()}`);
    const history = readFileSync(join(topology.checkpointDir, "history.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { timings: Record<string, number> })
      .slice(skip);
    const part = (keys: string[]) => median(history.map((h) => keys.reduce((sum, k) => sum + (h.timings[k] ?? 0), 0)));
    return {
      load: loadavg()[0] ?? 0,
      step: part(Object.keys(history[0]?.timings ?? {})),
      wait: part(["wait"]),
      update: part(["update"]),
      bridge: part(["enqueue", "collect", "convert", "publish"]),
      collect: part(["collect"]),
    };
  } finally {
    await topology.close();
    await relay?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const fmt = (s: number) => `${(s * 1000).toFixed(0)} ms`;
const direct = await run(false);
const delayed = await run(true);
console.log(`multi-host bench: ${steps} steps of 8 tasks x 16 rollouts each (medians of steps ${skip + 1}-${steps})`);
console.log(
  "| trainer <-> store link | step | waiting for rollouts | update | bridge (enqueue, collect, convert, publish) | of which collect | load |",
);
console.log("|---|---|---|---|---|---|---|");
for (const [name, r] of [
  ["direct", direct],
  [`+${rttMs} ms RTT (relay)`, delayed],
] as const) {
  console.log(
    `| ${name} | ${fmt(r.step)} | ${fmt(r.wait)} | ${fmt(r.update)} | ${fmt(r.bridge)} | ${fmt(r.collect)} | ${r.load.toFixed(1)} |`,
  );
}
