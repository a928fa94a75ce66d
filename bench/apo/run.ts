/**
 * APO benchmark: runs APO against a real store server (gRPC) and the runner pool, with scripted zero-latency LLMs
 * (the loopback OpenAI-compatible servers of the tests) for both the agent and the optimizer. It prints, per round,
 * the wall time split into time with rollouts in flight (waiting on the store), time in optimizer calls, and the
 * rest: APO's own overhead (enqueueing, reading spans into messages, critique prompts, snapshots, selection), which
 * is what remains with LLM latency excluded. Then rollouts/s through the pool: inside APO, and for one saturated
 * batch.
 *
 *   npx tsx bench/apo/run.ts --rounds 3 --beam 4 --branch 4 --workers 2 --concurrency 16
 */
import { parseArgs } from "node:util";
import { silentLogger } from "../../src/core/logger.js";
import type { ApoEvent } from "../../src/algorithm/apo/apo-events.js";
import { runApo } from "../../src/algorithm/apo/apo.js";
import { createOptimizerClient, type OptimizerClient } from "../../src/algorithm/apo/optimizer-client.js";
import { createStoreEvaluator } from "../../src/algorithm/apo/store-evaluator.js";
import { createStoreClient } from "../../src/client/store-client.js";
import { TemplateEngine } from "../../src/gen/agl/v1/types_pb.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import { createRunner } from "../../src/runner/runner.js";
import { startStoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { createStore } from "../../src/store/store.js";
import { agentModule, agentPolicy, hintTasks, optimizerPolicy } from "../../test/apo/apo-harness.js";
import { startFakeLlmServer } from "../../test/support/fake-llm-server.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    beam: { type: "string", default: "4" },
    branch: { type: "string", default: "4" },
    batch: { type: "string", default: "4" },
    "val-batch": { type: "string", default: "16" },
    train: { type: "string", default: "64" },
    val: { type: "string", default: "64" },
    workers: { type: "string", default: "2" },
    concurrency: { type: "string", default: "16" },
    saturate: { type: "string", default: "2000" },
  },
});

/** Busy intervals of one kind of call. */
function createIntervals() {
  const spans: [number, number][] = [];
  return {
    spans,
    async time<T>(fn: () => Promise<T>): Promise<T> {
      const start = performance.now();
      try {
        return await fn();
      } finally {
        spans.push([start, performance.now()]);
      }
    },
  };
}

/** The time in [a, b] covered by at least one of `spans`. */
function covered(spans: readonly [number, number][], a: number, b: number): number {
  const clipped = spans
    .map(([s, e]) => [Math.max(s, a), Math.min(e, b)] as const)
    .filter(([s, e]) => e > s)
    .sort((x, y) => x[0] - y[0]);
  let total = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [s, e] of clipped) {
    if (e <= end) continue;
    total += e - Math.max(s, end);
    end = e;
  }
  return total;
}

const store = createStore({ backend: createMemoryBackend() });
const server = await startStoreServer({ store, port: 0 });
const client = createStoreClient({ baseUrl: server.url });
const agentLlm = await startFakeLlmServer({ model: "agent-model", policy: agentPolicy });
const optimizerLlm = await startFakeLlmServer({ model: "opt-model", policy: optimizerPolicy });
const executor = createPoolExecutor({
  agentModule,
  workers: Number(args.workers),
  concurrency: Number(args.concurrency),
  logger: silentLogger,
});
const runner = createRunner({ store: client, executor, pollWaitSeconds: 1, logger: silentLogger });
const running = runner.run();

const waits = createIntervals();
const calls = createIntervals();
const timedStore = new Proxy(client, {
  get(target, key, receiver) {
    const value = Reflect.get(target, key, receiver);
    if (key !== "waitForRollouts" || typeof value !== "function") return value;
    return (...a: unknown[]) => waits.time(() => value.apply(target, a));
  },
}) as StoreApi;
const baseOptimizer = createOptimizerClient({ baseUrl: optimizerLlm.url });
const optimizer: OptimizerClient = {
  ...baseOptimizer,
  complete: (request, signal) => calls.time(() => baseOptimizer.complete(request, signal)),
};

// Warm the worker threads up (each loads the agent module on its first task).
await createStoreEvaluator({ store: client, runId: "warm", resume: false }).evaluate({
  key: "warm",
  resourcesId: (
    await client.addResources({
      resources: {
        llm: { kind: { case: "llm", value: { endpoint: agentLlm.url, model: "agent-model" } } },
        prompt: { kind: { case: "promptTemplate", value: { template: "{q}", engine: TemplateEngine.F_STRING } } },
      },
    })
  ).resourcesId,
  mode: "val",
  tasks: hintTasks(64).map((input, index) => ({ index, input })),
  withMessages: false,
});

const marks = new Map<string, number>();
const started = performance.now();
const report = await runApo({
  store: timedStore,
  templates: { prompt: "Answer this: {q}" },
  train: hintTasks(Number(args.train)),
  val: hintTasks(Number(args.val), 1_000),
  optimizer: { baseUrl: optimizerLlm.url, client: optimizer, gradientModel: "opt-model", editModel: "opt-model" },
  resources: { llm: { kind: { case: "llm", value: { endpoint: agentLlm.url, model: "agent-model" } } } },
  beamWidth: Number(args.beam),
  branchFactor: Number(args.branch),
  rounds: Number(args.rounds),
  gradientBatchSize: Number(args.batch),
  valBatchSize: Number(args["val-batch"]),
  logger: silentLogger,
  onEvent: (e: ApoEvent) => {
    if (e.type === "round_start") marks.set(`start${e.round}`, performance.now());
    if (e.type === "round_end") marks.set(`end${e.report.round}`, performance.now());
    if (e.type === "baseline") marks.set("baseline", performance.now());
  },
});
const total = performance.now() - started;

console.log(
  `APO: beam ${args.beam} × branch ${args.branch}, batch ${args.batch}, val batch ${args["val-batch"]}, train ${args.train}, val ` +
    `${args.val}; pool ${args.workers} workers × ${args.concurrency}; zero-latency scripted LLMs`,
);
console.log("round   wall ms  rollouts  calls  rollouts in flight ms  optimizer ms  APO overhead ms  overhead/rollout ms");
let previous = { rollouts: report.rounds.length > 0 ? (report.baseline === undefined ? 0 : Number(args.val)) : 0, optimizerCalls: 0 };
for (const round of report.rounds) {
  const a = marks.get(`start${round.round}`) as number;
  const b = marks.get(`end${round.round}`) as number;
  const inFlight = covered(waits.spans, a, b);
  const inCalls = covered(calls.spans, a, b);
  const overhead = b - a - covered([...waits.spans, ...calls.spans], a, b);
  const rollouts = round.used.rollouts - previous.rollouts;
  const optimizerCalls = round.used.optimizerCalls - previous.optimizerCalls;
  console.log(
    `${String(round.round).padStart(5)}  ${(b - a).toFixed(0).padStart(8)}  ${String(rollouts).padStart(8)}  ` +
      `${String(optimizerCalls).padStart(5)}` +
      `  ${inFlight.toFixed(0).padStart(21)}  ${inCalls.toFixed(0).padStart(12)}  ${overhead.toFixed(0).padStart(15)}  ` +
      `${(overhead / rollouts).toFixed(2).padStart(19)}`,
  );
  previous = { rollouts: round.used.rollouts, optimizerCalls: round.used.optimizerCalls };
}
const waitTotal = covered(waits.spans, started, started + total);
console.log(
  `whole run: ${total.toFixed(0)} ms, ${report.budget.used.rollouts} rollouts, ${report.budget.used.optimizerCalls} optimizer calls; ` +
    `${(report.budget.used.rollouts / (waitTotal / 1000)).toFixed(0)} rollouts/s while rollouts were in flight`,
);

// One saturated batch straight through the store and the pool.
const resourcesId = (
  await client.addResources({
    resources: {
      llm: { kind: { case: "llm", value: { endpoint: agentLlm.url, model: "agent-model" } } },
      prompt: { kind: { case: "promptTemplate", value: { template: "{q} hint-a", engine: TemplateEngine.F_STRING } } },
    },
  })
).resourcesId;
const n = Number(args.saturate);
const reads = createIntervals();
const satWaits = createIntervals();
const satStore = new Proxy(client, {
  get(target, key, receiver) {
    const value = Reflect.get(target, key, receiver);
    const timer = key === "querySpans" ? reads : key === "waitForRollouts" ? satWaits : undefined;
    if (!timer || typeof value !== "function") return value;
    return (...a: unknown[]) => timer.time(() => value.apply(target, a));
  },
}) as StoreApi;
const t0 = performance.now();
await createStoreEvaluator({ store: satStore, runId: "sat", resume: false }).evaluate({
  key: "sat",
  resourcesId,
  mode: "val",
  tasks: hintTasks(n).map((input, index) => ({ index, input })),
  withMessages: false,
});
const t1 = performance.now();
const seconds = (t1 - t0) / 1000;
console.log(
  `saturated batch: ${n} rollouts in ${seconds.toFixed(2)} s = ${(n / seconds).toFixed(0)} rollouts/s through the pool ` +
    `(enqueue → run → spans → finished: ${(covered(satWaits.spans, t0, t1) / 1000).toFixed(2)} s; reading ${n} rollouts' spans ` +
    `into rewards: ${(covered(reads.spans, t0, t1) / 1000).toFixed(2)} s)`,
);
await runner.stop({ graceMs: 1_000 });
await running;
await executor.close();
client.close();
await server.close();
await store.close();
await agentLlm.close();
await optimizerLlm.close();
