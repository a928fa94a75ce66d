/**
 * The dashboard's reads against a big SQLite store: fills a fresh database with --rollouts rollouts (default 100,000)
 * plus one rollout of --spans spans (default 500), as fill.ts describes, then serves it (`startStoreServer`, a real socket) and times what the views
 * call, as the browser does: Connect over HTTP/1.1 (binary), with a token. Prints wall-clock p50/p90/max per query and
 * the median CPU time per call (client and server share this process).
 *
 *   npx tsx bench/ui-queries/run.ts --rollouts 100000 --spans 500 --repeat 30
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ResourceService } from "../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { TripletService } from "../../src/gen/agl/v1/triplets_pb.js";
import { RolloutMode, RolloutStatus, SortOrder } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer } from "../../src/server/store-server.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore } from "../../src/store/store.js";
import { percentile } from "../stats.js";
import { fillDashboardStore } from "./fill.js";

const { values: args } = parseArgs({
  options: {
    rollouts: { type: "string", default: "100000" },
    spans: { type: "string", default: "500" },
    repeat: { type: "string", default: "30" },
  },
});
const total = Number(args.rollouts);
const bigSpans = Number(args.spans);
const repeat = Number(args.repeat);
const day = 86_400;
const token = "bench-token";

const dir = mkdtempSync(join(tmpdir(), "agl-bench-ui-"));
const path = join(dir, "ui.db");

/**
 * Wall-clock percentiles of `repeat` calls after a first one, and the median CPU time of this process per call (client
 * and server together): on a shared machine the CPU time is the steadier figure.
 */
async function time(label: string, call: () => Promise<unknown>): Promise<void> {
  const first = performance.now();
  await call();
  const firstMs = performance.now() - first;
  const samples: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < repeat; i++) {
    const start = performance.now();
    const startCpu = process.cpuUsage();
    await call();
    const used = process.cpuUsage(startCpu);
    samples.push(performance.now() - start);
    cpu.push((used.user + used.system) / 1000);
  }
  samples.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  const f = (ms: number) => ms.toFixed(1).padStart(7);
  console.log(
    `${label.padEnd(52)} first ${f(firstMs)}  p50 ${f(percentile(samples, 50))}  p90 ${f(percentile(samples, 90))}  ` +
      `max ${f(samples.at(-1)!)}  cpu p50 ${f(percentile(cpu, 50))} ms`,
  );
}

const started = performance.now();
const bigId = await fillDashboardStore({ path, rollouts: total, spans: bigSpans });
const seconds = (performance.now() - started) / 1000;
console.log(`filled ${total.toLocaleString("en")} rollouts + 1 of ${bigSpans} spans in ${seconds.toFixed(1)} s (${path})`);
const store = createStore({ backend: createSqliteBackend({ path }), watchdogIntervalSeconds: 0 });
const server = await startStoreServer({ store, port: 0, token });
const transport = createConnectTransport({
  baseUrl: server.url,
  httpVersion: "1.1",
  useBinaryFormat: true,
  interceptors: [
    (next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    },
  ],
});
const lightning = createClient(LightningStore, transport);
const resources = createClient(ResourceService, transport);
const triplets = createClient(TripletService, transport);
const page = (init: { sortBy?: string; desc?: boolean; offset?: number } = {}) => ({
  limit: 50,
  offset: init.offset ?? 0,
  sortBy: init.sortBy ?? "start_time",
  sortOrder: init.desc === false ? SortOrder.ASC : SortOrder.DESC,
});
const now = Date.now() / 1000;

console.log(`\nConnect (binary) over HTTP/1.1, ${repeat} runs after a first one; milliseconds per call`);
console.log("-- Rollouts view");
await time("first page, newest first, with final rewards", () => lightning.queryRollouts({ page: page(), includeFinalRewards: true }));
await time("status=succeeded, mode=train, newest first", () =>
  lightning.queryRollouts({ statusIn: [RolloutStatus.SUCCEEDED], modeIn: [RolloutMode.TRAIN], page: page(), includeFinalRewards: true }),
);
await time("resources policy v25, val, newest first", () =>
  lightning.queryRollouts({
    resourcesIdIn: ["policy"],
    resourcesVersion: 25,
    modeIn: [RolloutMode.VAL],
    page: page(),
    includeFinalRewards: true,
  }),
);
await time("created in the last hour, oldest first", () =>
  lightning.queryRollouts({ startTimeFrom: now - 3600, page: page({ desc: false }), includeFinalRewards: true }),
);
await time("one group", () => lightning.queryRollouts({ groupId: "g-00000100", page: page(), includeFinalRewards: true }));
await time("failed, sorted by end time", () =>
  lightning.queryRollouts({ statusIn: [RolloutStatus.FAILED], page: page({ sortBy: "end_time" }), includeFinalRewards: true }),
);
await time(`deep page (offset ${Math.floor(total * 0.9).toLocaleString("en")}), sorted by start time`, () =>
  lightning.queryRollouts({ page: page({ offset: Math.floor(total * 0.9), desc: false }), includeFinalRewards: true }),
);
await time("id contains (substring scan)", () =>
  lightning.queryRollouts({ rolloutIdContains: "abc", page: page(), includeFinalRewards: true }),
);
console.log("-- Overview and Training views");
await time("GetStatistics", () => lightning.getStatistics({}));
await time("GetRolloutTimeline, whole store, one bucket", () => lightning.getRolloutTimeline({}));
await time("GetRolloutTimeline, last 24 h in 1-min buckets", () =>
  lightning.getRolloutTimeline({ startTime: now - day, bucketSeconds: 60 }),
);
await time("GetRolloutTimeline, last hour in 10-s buckets", () =>
  lightning.getRolloutTimeline({ startTime: now - 3600, bucketSeconds: 10 }),
);
await time("GetRewardsByResources, every version and mode", () => lightning.getRewardsByResources({}));
await time("GetRewardsByResources, val only", () => lightning.getRewardsByResources({ modeIn: [RolloutMode.VAL] }));
await time("QueryWorkers + GetLatestResources", () => Promise.all([lightning.queryWorkers({}), resources.getLatestResources({})]));
console.log(`-- A rollout of ${bigSpans} spans`);
await time("GetRollout + QueryAttempts", () =>
  Promise.all([lightning.getRollout({ rolloutId: bigId }), lightning.queryAttempts({ rolloutId: bigId })]),
);
await time(`QuerySpans (all ${bigSpans})`, () => lightning.querySpans({ rolloutId: bigId }));
await time("GetRolloutTriplets (token ids, logprobs)", () => triplets.getRolloutTriplets({ rolloutId: bigId }));
await time("GetRolloutMessages (chat view)", () => triplets.getRolloutMessages({ rolloutIds: [bigId] }));
await time("first render: all of the above at once", () =>
  Promise.all([
    lightning.getRollout({ rolloutId: bigId }),
    lightning.queryAttempts({ rolloutId: bigId }),
    lightning.querySpans({ rolloutId: bigId }),
    triplets.getRolloutTriplets({ rolloutId: bigId }),
    triplets.getRolloutMessages({ rolloutIds: [bigId] }),
  ]),
);

await server.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
