/**
 * One fuzzing session against a real `agl serve` process: known data first (sentinels the fuzzer never names, and a
 * pool of rollouts, attempts and spans it works on), then the fuzzer, then everything a test asserts on — whether the
 * process is alive and healthy, the sentinels as they were and are, the store's consistency, its stderr.
 */
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcJsTransport } from "../../../src/client/grpc-js-transport.js";
import { createStoreClient, type StoreClient } from "../../../src/client/store-client.js";
import { AttemptStatus, ResourceSchema, RolloutStatus } from "../../../src/gen/agl/v1/types_pb.js";
import { Health, type HealthCheckResponse_ServingStatus } from "../../../src/gen/grpc/health/v1/health_pb.js";
import { type ServerProcess, startServerProcess } from "../server-process.js";
import { jsonValue } from "../store-harness.js";
import type { FuzzReport } from "./fuzz-methods.js";
import type { FuzzOptions } from "./grpc-fuzz.js";
import { createPrng } from "./prng.js";
import { emptyIdPool, type IdPool } from "./random-message.js";
import { queueViolations, storeViolations } from "./store-invariants.js";

export interface FuzzSessionResult {
  report: FuzzReport;
  /** The server process had not exited when the fuzzer finished. */
  alive: boolean;
  /** `GET /healthz` and `grpc.health.v1.Health/Check` afterwards. */
  healthz: { status: number; body: string };
  grpcHealth: HealthCheckResponse_ServingStatus;
  sentinelsBefore: unknown;
  sentinelsAfter: unknown;
  violations: string[];
  queueProblems: string[];
  stderr: string;
}

const spans = (rolloutId: string, attemptId: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    rolloutId,
    attemptId,
    spanId: randomBytes(8).toString("hex"),
    traceId: randomBytes(16).toString("hex"),
    name: `known-${i}`,
  }));

/** Three finished rollouts with attempts, spans, a resources version and a worker, which the fuzzer never names. */
async function addSentinels(client: StoreClient): Promise<{ ids: Set<string>; snapshot: () => Promise<unknown> }> {
  const resources = { prompt: create(ResourceSchema, { kind: { case: "json", value: jsonValue({ text: "sentinel" }) } }) };
  await client.updateResources({ resourcesId: "sentinel-resources", resources, createIfMissing: true });
  const enqueued = (
    await client.enqueueRollouts({
      rollouts: [0, 1, 2].map((i) => ({ input: jsonValue({ sentinel: i }), resourcesId: "sentinel-resources", metadata: { i } })),
    })
  ).rollouts;
  const claimed = (await client.dequeueRollouts({ workerId: "sentinel-worker", limit: 3 })).rollouts;
  const ids = new Set(["sentinel-resources", "sentinel-worker"]);
  for (const r of claimed) {
    ids.add(r.rolloutId).add(r.latestAttempt!.attemptId);
    await client.addSpans({ spans: spans(r.rolloutId, r.latestAttempt!.attemptId, 4) });
  }
  await client.updateAttempt({ rolloutId: claimed[0]!.rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED });
  await client.updateAttempt({ rolloutId: claimed[1]!.rolloutId, attemptId: "latest", status: AttemptStatus.FAILED });
  await client.updateRollout({ rolloutId: claimed[2]!.rolloutId, status: RolloutStatus.CANCELLED });
  const snapshot = async () => ({
    rollouts: await Promise.all(enqueued.map((r) => client.getRollout({ rolloutId: r.rolloutId }))),
    attempts: await Promise.all(enqueued.map((r) => client.queryAttempts({ rolloutId: r.rolloutId }))),
    spans: await Promise.all(enqueued.map((r) => client.querySpans({ rolloutId: r.rolloutId }))),
    resources: await client.getResources({ resourcesId: "sentinel-resources" }),
  });
  return { ids, snapshot };
}

/** Rollouts in every state for the fuzzer to work on; their ids seed its pool. */
async function addPool(client: StoreClient): Promise<IdPool> {
  const pool = emptyIdPool();
  await client.updateResources({ resourcesId: "fuzz-resources", resources: {}, createIfMissing: true });
  pool.resources.push("fuzz-resources");
  const configs = [{}, { maxAttempts: 3, retryCondition: [AttemptStatus.FAILED] }, { timeoutSeconds: 600, unresponsiveSeconds: 600 }];
  const enqueued = (
    await client.enqueueRollouts({
      rollouts: Array.from({ length: 8 }, (_, i) => ({ input: jsonValue({ i }), config: configs[i % 3]!, groupId: `fuzz-group-${i % 2}` })),
    })
  ).rollouts;
  pool.rollouts.push(...enqueued.map((r) => r.rolloutId));
  pool.groups.push("fuzz-group-0", "fuzz-group-1");
  const claimed = (await client.dequeueRollouts({ workerId: "fuzz-worker", limit: 4 })).rollouts;
  pool.workers.push("fuzz-worker");
  for (const r of claimed) {
    pool.attempts.push([r.rolloutId, r.latestAttempt!.attemptId]);
    await client.addSpans({ spans: spans(r.rolloutId, r.latestAttempt!.attemptId, 3) });
  }
  await client.updateAttempt({ rolloutId: claimed[0]!.rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED });
  return pool;
}

async function healthzOf(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${url}/healthz`);
  return { status: res.status, body: await res.text() };
}

/** Starts `agl serve <serveArgs>`, fuzzes it with `fuzz` and reads back everything the test asserts on. */
export async function runFuzzSession(
  serveArgs: string[],
  fuzz: (options: FuzzOptions) => Promise<FuzzReport>,
  budget: { seed: number; maxCases: number; maxMs: number },
): Promise<FuzzSessionResult> {
  const server: ServerProcess = await startServerProcess(serveArgs);
  const client = createStoreClient({ baseUrl: server.url, maxTries: 1 });
  const transport = createGrpcJsTransport({ address: new URL(server.url).host });
  try {
    const sentinels = await addSentinels(client);
    const ids = await addPool(client);
    const sentinelsBefore = await sentinels.snapshot();
    const report = await fuzz({
      url: server.url,
      rng: createPrng(budget.seed),
      ids,
      protectedIds: sentinels.ids,
      maxCases: budget.maxCases,
      maxMs: budget.maxMs,
    });
    const alive = server.child.exitCode === null && server.child.signalCode === null;
    const healthz = await healthzOf(server.url);
    const grpcHealth = (await createClient(Health, transport).check({ service: "" })).status;
    const sentinelsAfter = await sentinels.snapshot();
    const violations = await storeViolations(client);
    const queueProblems = await queueViolations(client);
    return { report, alive, healthz, grpcHealth, sentinelsBefore, sentinelsAfter, violations, queueProblems, stderr: server.stderr() };
  } catch (error) {
    // A setup or invariant call failed: what the server logged (an unexpected error's stack) says why.
    throw new Error(`seed ${budget.seed}: ${String(error)}\nserver stderr:\n${server.stderr()}`, { cause: error });
  } finally {
    transport.close();
    client.close();
    await server.kill();
  }
}
