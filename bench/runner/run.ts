/**
 * Runner bench: prints figures, never fails.
 *
 * 1. Framework overhead per rollout with a no-op agent: time from a claimed rollout being dispatched to its final
 *    update being sent, minus the agent's own time (so: task building, the hop to a worker thread and back, the
 *    attempt scope and root span, span conversion and draining; no store RPC is inside it), and rollouts/s end to end
 *    through a real store server over gRPC.
 * 2. 1,000 concurrent I/O-bound rollouts (each awaiting 1 s) on 2 worker threads: wall time and peak RSS.
 *
 * The store is a separate `agl serve --memory` process; peak RSS is the runner process's (worker threads included).
 *
 * Run: npx tsx bench/runner/run.ts
 */
import { availableParallelism, loadavg } from "node:os";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { silentLogger } from "../../src/core/logger.js";
import { createStoreClient } from "../../src/client/store-client.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner, type AttemptEndEvent } from "../../src/runner/runner.js";
import { startServerProcess } from "../../test/support/server-process.js";
import { noop } from "./agents.js";
import { processCpuSeconds } from "../stats.js";

const agents = new URL("./agents.ts", import.meta.url).pathname;
const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(3)} ms`;
/** CPU milliseconds (user + system) a process has used so far, from /proc (Linux). */
function processCpuMs(pid: number): number {
  try {
    return processCpuSeconds(pid) * 1000;
  } catch {
    return Number.NaN;
  }
}

async function session(
  makeExecutor: () => AttemptExecutor,
  inputs: unknown[],
  label: string,
  extra: (wallMs: number, events: AttemptEndEvent[]) => string[],
) {
  // The store runs as its own process (`agl serve --memory`), as in a deployment.
  const server = await startServerProcess(["--memory"]);
  const client = createStoreClient({ baseUrl: server.url });
  const executor = makeExecutor();
  const events: AttemptEndEvent[] = [];
  const runner = createRunner({ store: client, executor, logger: silentLogger, pollWaitSeconds: 0.5, onAttemptEnd: (e) => events.push(e) });
  const running = runner.run();
  // Warm up: threads started, modules loaded, connections open.
  const warm = await client.enqueueRollouts({ rollouts: [{ input: fromJson(ValueSchema, { ms: 0 }) }] });
  await client.waitForRollouts({ rolloutIds: warm.rollouts.map((r) => r.rolloutId), timeoutSeconds: 60 });
  events.length = 0;

  let peakRss = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 20);
  const cpuBefore = { runner: process.cpuUsage(), store: processCpuMs(server.pid) };
  const started = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < inputs.length; i += 1_000) {
    const batch = inputs.slice(i, i + 1_000).map((input) => ({ input: fromJson(ValueSchema, input as never) }));
    ids.push(...(await client.enqueueRollouts({ rollouts: batch })).rollouts.map((r) => r.rolloutId));
  }
  // Polls the store's counts (cheap), so the figure includes no waiting machinery.
  let succeeded = 0;
  for (;;) {
    const byStatus = (await client.getStatistics({})).rolloutsByStatus;
    succeeded = byStatus.ROLLOUT_STATUS_SUCCEEDED ?? 0;
    const failed = (byStatus.ROLLOUT_STATUS_FAILED ?? 0) + (byStatus.ROLLOUT_STATUS_CANCELLED ?? 0);
    if (succeeded + failed >= ids.length + 1) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  succeeded -= 1; // the warm-up rollout
  const wallMs = performance.now() - started;
  const runnerCpu = process.cpuUsage(cpuBefore.runner);
  const runnerCpuMs = (runnerCpu.user + runnerCpu.system) / 1000;
  const storeCpuMs = processCpuMs(server.pid) - cpuBefore.store;
  clearInterval(sampler);
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  console.log(`\n${label}`);
  console.log(`  rollouts: ${ids.length} (${succeeded} succeeded) in ${(wallMs / 1000).toFixed(2)} s wall`);
  for (const line of extra(wallMs, events)) console.log(`  ${line}`);
  // CPU time does not depend on what else the machine runs; wall time does (a busy shared machine stretches it).
  console.log(
    `  CPU per rollout: runner process ${(runnerCpuMs / ids.length).toFixed(2)} ms (all threads), store process ` +
      `${(storeCpuMs / ids.length).toFixed(2)} ms; load average ${loadavg()[0]?.toFixed(1)} on ${availableParallelism()} cores`,
  );
  console.log(`  peak RSS (process, worker threads included): ${(peakRss / 1048576).toFixed(0)} MiB`);
  await runner.stop({ graceMs: 0 });
  await running;
  await executor.close();
  client.close();
  await server.stop();
}

const overheadLines = (wallMs: number, events: AttemptEndEvent[]) => {
  const overheads = events.map((e) => e.overheadMs);
  return [
    `end to end: ${(events.length / (wallMs / 1000)).toFixed(0)} rollouts/s (enqueue → all finished, through the store over gRPC)`,
    `framework overhead per rollout: p50 ${ms(quantile(overheads, 0.5))}, p90 ${ms(quantile(overheads, 0.9))}, p99 ` +
      `${ms(quantile(overheads, 0.99))}`,
  ];
};

const n = Number(process.env.BENCH_ROLLOUTS ?? 3_000);
// BENCH_ONLY=1a,2 runs only those sessions.
const only = process.env.BENCH_ONLY?.split(",");
const wanted = (id: string) => !only || only.includes(id);
const noops = Array.from({ length: n }, () => ({ ms: 0 }));
// One rollout at a time isolates the per-rollout cost from queueing behind other rollouts.
if (wanted("1a"))
  await session(
    () => createPoolExecutor({ agentModule: agents, exportName: "noop", workers: 1, concurrency: 1, logger: silentLogger }),
    noops.slice(0, 500),
    "1a. no-op agent, pool of 1 thread × 1 (sequential: per-rollout latency)",
    overheadLines,
  );
if (wanted("1b"))
  await session(
    () => createPoolExecutor({ agentModule: agents, exportName: "noop", workers: 2, concurrency: 64, logger: silentLogger }),
    noops,
    "1b. no-op agent, pool of 2 threads × 64 (throughput)",
    overheadLines,
  );
if (wanted("1c"))
  await session(
    () => createInProcessExecutor({ agent: noop, concurrency: 64 }),
    noops,
    "1c. no-op agent, on the runner's thread × 64",
    overheadLines,
  );
if (wanted("2"))
  await session(
    () => createPoolExecutor({ agentModule: agents, exportName: "waiter", workers: 2, concurrency: 500, logger: silentLogger }),
    Array.from({ length: 1_000 }, () => ({ ms: 1_000 })),
    "2. 1,000 I/O-bound rollouts (each awaits 1 s), pool of 2 threads × 500",
    (wallMs) => [`target: < 3 s wall, RSS < 1 GiB → ${wallMs < 3_000 ? "met" : "NOT met"} (wall)`],
  );
