/**
 * The store's own CPU per rollout, without the network: `bench/store`'s lifecycle (rollouts enqueued in batches of 100;
 * runners that claim them, send spans of ~1 KB in batches, the last batch riding on the `UpdateAttempt` that reports
 * success) as calls on a store in this process, built from a checkout's compiled `dist/` (`make build` there first).
 * Without gRPC and a load generator beside it, a change to the store's own path shows at a few percent, where
 * `bench/store`'s figures move by more than that from one run to the next.
 *
 *   npx tsx bench/store/in-process.ts [--backend sqlite|memory] [--rollouts 5000] [--warmup 1000] [--runners 32]
 *                                     [--spans 10] [--span-batch 5] [--dequeue-batch 1]
 *   npx tsx bench/store/in-process.ts --compare ../base [--rounds 4]   # this checkout against another, ABBA order
 *
 * Every measurement runs in a fresh process. `--compare DIR` runs this checkout and DIR in ABBA order `--rounds` times
 * and prints each run, then the mean and median of each: one build's runs spread by ±15 % on the shared machine, and
 * the order evens out what a run inherits from the one before it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { inTurns, printSummary, runInChild } from "../checkouts-in-turns.js";
import { spanMaker } from "./spans.js";

const { values: args } = parseArgs({
  options: {
    backend: { type: "string", default: "sqlite" },
    rollouts: { type: "string", default: "5000" },
    warmup: { type: "string", default: "1000" },
    runners: { type: "string", default: "32" },
    spans: { type: "string", default: "10" },
    "span-batch": { type: "string", default: "5" },
    "dequeue-batch": { type: "string", default: "1" },
    compare: { type: "string" },
    rounds: { type: "string", default: "4" },
    /** Internal: measure the checkout at this root and print one JSON line. */
    root: { type: "string" },
  },
});
if (args.backend !== "sqlite" && args.backend !== "memory") throw new Error("--backend is sqlite or memory");
const here = resolve(fileURLToPath(new URL("../..", import.meta.url)));

interface Result {
  rolloutsPerSecond: number;
  cpuMsPerRollout: number;
}

if (args.root !== undefined) {
  process.stdout.write(`${JSON.stringify(await measure(resolve(args.root)))}\n`);
  process.exit(0);
} else if (args.compare === undefined) {
  print(here, measureInChild(here));
} else {
  const run = (root: string) => {
    const result = measureInChild(root);
    print(root, result);
    return result;
  };
  const cpu = inTurns([here, resolve(args.compare)], Number(args.rounds), run, (result) => result.cpuMsPerRollout);
  printSummary(cpu, "CPU a rollout", "ms", 3);
}

function print(root: string, result: Result): void {
  console.log(`${root}: ${result.rolloutsPerSecond.toFixed(0)} rollouts/s, CPU ${result.cpuMsPerRollout.toFixed(3)} ms a rollout`);
}

function measureInChild(root: string): Result {
  const forwarded = ["backend", "rollouts", "warmup", "runners", "spans", "span-batch", "dequeue-batch"] as const;
  return runInChild(import.meta.url, ["--root", root, ...forwarded.flatMap((name) => [`--${name}`, String(args[name])])], here);
}

/** Runs the lifecycle against the store of the checkout at `root`: a warm-up, then the measured rollouts. */
async function measure(root: string): Promise<Result> {
  const { createStore, createSqliteBackend, createMemoryBackend } = await import(pathToFileURL(join(root, "dist/store.js")).href);
  const dir = mkdtempSync(join(tmpdir(), "agl-bench-store-in-process-"));
  const store = createStore({
    backend: args.backend === "sqlite" ? createSqliteBackend({ path: join(dir, "agl.db") }) : createMemoryBackend(),
  });
  const spansPerRollout = Number(args.spans);
  const spanBatch = Math.min(Number(args["span-batch"]), spansPerRollout);
  const spans = spanMaker(1024);

  const run = async (total: number) => {
    let done = 0;
    const enqueue = async () => {
      for (let sent = 0; sent < total; sent += 100) {
        const rollouts = Array.from({ length: Math.min(100, total - sent) }, (_, i) => ({ metadata: { task: sent + i } }));
        await store.enqueueRollouts({ rollouts });
      }
    };
    const runner = async (k: number) => {
      while (done < total) {
        const { rollouts } = await store.dequeueRollouts({ workerId: `w${k}`, limit: Number(args["dequeue-batch"]), waitSeconds: 0.2 });
        for (const rollout of rollouts) {
          const { attemptId } = rollout.latestAttempt;
          let sent = 0;
          for (; spansPerRollout - sent > spanBatch; sent += spanBatch) {
            await store.addSpans({ spans: spans(rollout.rolloutId, attemptId, spanBatch) });
          }
          const last = spans(rollout.rolloutId, attemptId, spansPerRollout - sent);
          await store.updateAttempt({ rolloutId: rollout.rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans: last });
          done++;
        }
      }
    };
    await Promise.all([enqueue(), ...Array.from({ length: Number(args.runners) }, (_, k) => runner(k))]);
  };

  try {
    await run(Number(args.warmup));
    const total = Number(args.rollouts);
    const cpu = process.cpuUsage();
    const started = performance.now();
    await run(total);
    const used = process.cpuUsage(cpu);
    return {
      rolloutsPerSecond: total / ((performance.now() - started) / 1000),
      cpuMsPerRollout: (used.user + used.system) / 1000 / total,
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
