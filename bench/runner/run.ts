/**
 * Runner bench: prints figures, never fails.
 *
 * 1. Framework overhead per rollout with a no-op agent: time from a claimed rollout being dispatched to its final
 *    update being sent, minus the agent's own time (so: task building, the hop to a worker thread and back, the
 *    attempt scope and root span, span conversion and draining; no store RPC is inside it), and rollouts/s end to end
 *    through a real store server over gRPC.
 * 2. 1,000 concurrent I/O-bound rollouts (each awaiting 1 s) on 2 worker threads: wall time and peak RSS.
 *
 * Run: npx tsx bench/runner/run.ts
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { silentLogger } from "../../src/agent/logger.js";
import { createStoreClient } from "../../src/client/store-client.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner, type AttemptEndEvent } from "../../src/runner/runner.js";
import { startStoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/memory-backend.js";
import { createStore } from "../../src/store/store.js";
import { noop } from "./agents.js";

const agents = new URL("./agents.ts", import.meta.url).pathname;
const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(3)} ms`;

async function session(makeExecutor: () => AttemptExecutor, inputs: unknown[], label: string, extra: (wallMs: number, events: AttemptEndEvent[]) => string[]) {
  const store = createStore({ backend: createMemoryBackend() });
  const server = await startStoreServer({ store, port: 0 });
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
  const started = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < inputs.length; i += 1_000) {
    const batch = inputs.slice(i, i + 1_000).map((input) => ({ input: fromJson(ValueSchema, input as never) }));
    ids.push(...(await client.enqueueRollouts({ rollouts: batch })).rollouts.map((r) => r.rolloutId));
  }
  const { rollouts } = await client.waitForRollouts({ rolloutIds: ids, timeoutSeconds: 600 });
  const wallMs = performance.now() - started;
  clearInterval(sampler);
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  const succeeded = rollouts.filter((r) => r.status === 5).length;
  console.log(`\n${label}`);
  console.log(`  rollouts: ${ids.length} (${succeeded} succeeded) in ${(wallMs / 1000).toFixed(2)} s wall`);
  for (const line of extra(wallMs, events)) console.log(`  ${line}`);
  console.log(`  peak RSS (process, worker threads included): ${(peakRss / 1048576).toFixed(0)} MiB`);
  await runner.stop({ graceMs: 0 });
  await running;
  await executor.close();
  client.close();
  await server.close();
  await store.close();
}

const overheadLines = (wallMs: number, events: AttemptEndEvent[]) => {
  const overheads = events.map((e) => e.overheadMs);
  return [
    `end to end: ${(events.length / (wallMs / 1000)).toFixed(0)} rollouts/s (enqueue → all finished, through the store over gRPC)`,
    `framework overhead per rollout: p50 ${ms(quantile(overheads, 0.5))}, p90 ${ms(quantile(overheads, 0.9))}, p99 ${ms(quantile(overheads, 0.99))}`,
  ];
};

const n = Number(process.env.BENCH_ROLLOUTS ?? 3_000);
const noops = Array.from({ length: n }, () => ({ ms: 0 }));
// One rollout at a time isolates the per-rollout cost from queueing behind other rollouts.
await session(() => createPoolExecutor({ agentModule: agents, exportName: "noop", workers: 1, concurrency: 1, logger: silentLogger }), noops.slice(0, 500), "1a. no-op agent, pool of 1 thread × 1 (sequential: per-rollout latency)", overheadLines);
await session(() => createPoolExecutor({ agentModule: agents, exportName: "noop", workers: 2, concurrency: 64, logger: silentLogger }), noops, "1b. no-op agent, pool of 2 threads × 64 (throughput)", overheadLines);
await session(() => createInProcessExecutor({ agent: noop, concurrency: 64 }), noops, "1c. no-op agent, on the runner's thread × 64", overheadLines);
await session(
  () => createPoolExecutor({ agentModule: agents, exportName: "waiter", workers: 2, concurrency: 500, logger: silentLogger }),
  Array.from({ length: 1_000 }, () => ({ ms: 1_000 })),
  "2. 1,000 I/O-bound rollouts (each awaits 1 s), pool of 2 threads × 500",
  (wallMs) => [`target: < 3 s wall, RSS < 1 GiB → ${wallMs < 3_000 ? "met" : "NOT met"} (wall)`],
);
