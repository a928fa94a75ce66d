/**
 * The dashboard's reads against a big SQLite store: fills a fresh database with --rollouts rollouts (default 100,000:
 * mixed statuses and modes, 50 versions of one resources snapshot, groups of 8, a day of creation times; finished
 * ones with a reward span and two LLM calls) plus one rollout of --spans spans (default 500: LLM calls with token ids
 * and logprobs, tool spans, a reward), then serves it (`startStoreServer`, a real socket) and times what the views
 * call, as the browser does: Connect over HTTP/1.1 (binary), with a token. Prints wall-clock p50/p90/max per query and
 * the median CPU time per call (client and server share this process).
 *
 *   npx tsx bench/ui-queries/run.ts --rollouts 100000 --spans 500 --repeat 30
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { ResourceService } from "../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { TripletService } from "../../src/gen/agl/v1/triplets_pb.js";
import {
  AttemptSchema,
  AttemptStatus,
  ResourcesUpdateSchema,
  type Rollout,
  RolloutMode,
  RolloutSchema,
  RolloutStatus,
  type Span,
  SpanSchema,
  SortOrder,
} from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer } from "../../src/server/store-server.js";
import type { StorageTx } from "../../src/store/backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore } from "../../src/store/store.js";

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
const versions = 50;
const day = 86_400;
const t0 = Math.floor(Date.now() / 1000) - day;
const token = "bench-token";

const dir = mkdtempSync(join(tmpdir(), "agl-bench-ui-"));
const path = join(dir, "ui.db");
const backend = createSqliteBackend({ path });

/** A deterministic pseudo-random number in [0, 1) for item i and salt k. */
const rand = (i: number, k: number) => {
  const x = Math.sin(i * 12.9898 + k * 78.233) * 43_758.5453;
  return x - Math.floor(x);
};
const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
const tokenIds = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 31) % 150_000));

function llmSpan(rolloutId: string, attemptId: string, seq: number, parentId: string, prompt: number, response: number): Span {
  const ids = tokenIds(response, seq);
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    sequenceId: seq,
    traceId: "ab".repeat(16),
    spanId: hex(seq, 16),
    parentId,
    name: "chat m",
    startTime: t0 + seq,
    endTime: t0 + seq + 0.5,
    attributes: {
      [sc.AGL_LLM_SOURCE]: attr.string("proxy"),
      [sc.GEN_AI_OPERATION_NAME]: attr.string("chat"),
      [sc.GEN_AI_RESPONSE_MODEL]: attr.string("m"),
      [sc.AGL_LLM_PROMPT_TOKEN_IDS]: attr.ints(tokenIds(prompt, seq + 1)),
      [sc.AGL_LLM_RESPONSE_TOKEN_IDS]: attr.ints(ids),
      [sc.AGL_LLM_LOGPROBS]: attr.doubles(ids.map((_, i) => -i / 100)),
      [sc.AGL_LLM_REQUEST]: attr.json({ model: "m", messages: [{ role: "user", content: `question ${seq}` }] }),
      [sc.AGL_LLM_RESPONSE]: attr.json({ choices: [{ message: { role: "assistant", content: `answer ${seq}` } }] }),
    },
  });
}

function plainSpan(rolloutId: string, attemptId: string, seq: number, parentId: string, name: string, attributes: Span["attributes"] = {}) {
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    sequenceId: seq,
    traceId: "ab".repeat(16),
    spanId: hex(seq, 16),
    parentId,
    name,
    startTime: t0 + seq,
    endTime: t0 + seq + 0.2,
    attributes,
  });
}

/** Rollout i: its row, its attempt (unless queued), and its spans (finished ones: two calls and a reward). */
function rolloutRows(i: number): { rollout: Rollout; spans: Span[]; attempt?: ReturnType<typeof create<typeof AttemptSchema>> } {
  const rolloutId = `ro-${hex(i, 12)}`;
  const attemptId = `at-${hex(i, 8)}`;
  const startTime = t0 + (i / total) * day;
  const r = rand(i, 1);
  // Mostly finished, as in a long training run; the newest are still queued or running.
  const recent = i > total - 200;
  const status = recent
    ? r < 0.5
      ? RolloutStatus.QUEUING
      : RolloutStatus.RUNNING
    : r < 0.8
      ? RolloutStatus.SUCCEEDED
      : r < 0.95
        ? RolloutStatus.FAILED
        : RolloutStatus.CANCELLED;
  const finished = status === RolloutStatus.SUCCEEDED || status === RolloutStatus.FAILED || status === RolloutStatus.CANCELLED;
  const endTime = finished ? startTime + 5 + rand(i, 2) * 30 : undefined;
  const rollout = create(RolloutSchema, {
    rolloutId,
    startTime,
    endTime,
    mode: rand(i, 3) < 0.9 ? RolloutMode.TRAIN : RolloutMode.VAL,
    resourcesId: "policy",
    resourcesVersion: 1 + Math.floor((i / total) * versions),
    status,
    groupId: `g-${hex(Math.floor(i / 8), 8)}`,
    config: { maxAttempts: 1 },
  });
  if (status === RolloutStatus.QUEUING) return { rollout, spans: [] };
  const attempt = create(AttemptSchema, {
    rolloutId,
    attemptId,
    sequenceId: 1,
    startTime,
    endTime,
    status:
      status === RolloutStatus.RUNNING
        ? AttemptStatus.RUNNING
        : status === RolloutStatus.FAILED
          ? AttemptStatus.FAILED
          : AttemptStatus.SUCCEEDED,
    workerId: `w-${i % 64}`,
  });
  if (!finished) return { rollout, attempt, spans: [] };
  const reward = Math.min(1, Math.max(0, (i / total) * 0.6 + rand(i, 4) * 0.4));
  const spans = [
    llmSpan(rolloutId, attemptId, 1, "", 200, 40),
    llmSpan(rolloutId, attemptId, 2, "", 260, 40),
    plainSpan(rolloutId, attemptId, 3, "", sc.AGL_ANNOTATION, { [sc.rewardValueKey(0)]: attr.double(reward) }),
  ];
  return { rollout, attempt, spans };
}

async function fill(): Promise<string> {
  const started = performance.now();
  await backend.transaction(async (tx) => {
    for (let v = 1; v <= versions; v++) {
      await tx.putResources(create(ResourcesUpdateSchema, { resourcesId: "policy", createTime: t0, updateTime: t0 + v, version: v }));
    }
  });
  const chunk = 2_000;
  for (let from = 0; from < total; from += chunk) {
    await backend.transaction(async (tx) => {
      const rows = Array.from({ length: Math.min(chunk, total - from) }, (_, k) => rolloutRows(from + k));
      await tx.insertRollouts(rows.map((row) => row.rollout));
      await tx.enqueue(rows.filter((row) => row.rollout.status === RolloutStatus.QUEUING).map((row) => row.rollout.rolloutId));
      for (const row of rows) if (row.attempt) await tx.insertAttempt(row.attempt);
      await tx.insertSpans(rows.flatMap((row) => row.spans));
    });
  }
  const bigId = await backend.transaction((tx) => bigRollout(tx));
  const seconds = (performance.now() - started) / 1000;
  console.log(`filled ${total.toLocaleString("en")} rollouts + 1 of ${bigSpans} spans in ${seconds.toFixed(1)} s (${path})`);
  return bigId;
}

/** One rollout of `bigSpans` spans: an agent span, then LLM call, tool span, tool span… and a reward at the end. */
async function bigRollout(tx: StorageTx): Promise<string> {
  const rolloutId = "ro-big000000000";
  const attemptId = "at-big00001";
  const rollout = rolloutRows(0).rollout;
  await tx.insertRollouts([create(RolloutSchema, { ...rollout, rolloutId, groupId: "big", status: RolloutStatus.SUCCEEDED })]);
  await tx.insertAttempt(
    create(AttemptSchema, { rolloutId, attemptId, sequenceId: 1, startTime: t0, endTime: t0 + 900, status: AttemptStatus.SUCCEEDED }),
  );
  const agent = hex(1, 16);
  const spans: Span[] = [
    plainSpan(rolloutId, attemptId, 1, "", "invoke_agent solver", { [sc.GEN_AI_OPERATION_NAME]: attr.string("invoke_agent") }),
  ];
  for (let seq = 2; seq < bigSpans; seq++) {
    spans.push(
      seq % 3 === 2
        ? llmSpan(rolloutId, attemptId, seq, agent, 300 + seq, 60)
        : plainSpan(rolloutId, attemptId, seq, agent, "execute_tool search", { [sc.GEN_AI_OPERATION_NAME]: attr.string("execute_tool") }),
    );
  }
  spans.push(plainSpan(rolloutId, attemptId, bigSpans, agent, sc.AGL_ANNOTATION, { [sc.rewardValueKey(0)]: attr.double(1) }));
  await tx.insertSpans(spans);
  await tx.raiseSequenceId(rolloutId, bigSpans);
  return rolloutId;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

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

const bigId = await fill();
const store = createStore({ backend, watchdogIntervalSeconds: 0 });
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
