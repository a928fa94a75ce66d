/**
 * Bad input over native gRPC: a bounded, seeded fuzz of every store method (random and mutated protobuf, random
 * bytes, another method's message, unknown paths) against real `agl serve` processes on each storage backend. The
 * server answers every call with a proper status, stays up and healthy, and its data stays consistent; data the
 * fuzzer never named is untouched. The seed is printed; AGL_FUZZ_SEED=<seed> replays a run.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { HealthCheckResponse_ServingStatus } from "../../src/gen/grpc/health/v1/health_pb.js";
import { runFuzzSession } from "../support/fuzz/fuzz-session.js";
import { fuzzGrpc } from "../support/fuzz/grpc-fuzz.js";
import { fuzzSeed } from "../support/fuzz/prng.js";
import { dropSchema, freshSchema, postgresUrl } from "../support/postgres.js";

const seed = fuzzSeed();
// AGL_FUZZ_CASES=<n> fuzzes longer (n cases per backend, no time cap), to hunt for bugs by hand.
const longRun = Number(process.env.AGL_FUZZ_CASES ?? 0);
console.log(`gRPC fuzz seed ${seed} (AGL_FUZZ_SEED=${seed} replays it)`);
const dir = mkdtempSync(join(tmpdir(), "agl-fuzz-grpc-"));
const schemas: string[] = [];
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  for (const schema of schemas) await dropSchema(schema);
});

const backends: Array<[string, () => string[], number]> = [
  ["memory", () => ["--memory"], 3_000],
  ["SQLite", () => ["--database", join(dir, "fuzz.db")], 3_000],
  ["PostgreSQL", () => {
    const schema = freshSchema();
    schemas.push(schema);
    return ["--database", `${postgresUrl()}?schema=${schema}`];
  }, 1_500],
];

describe("fuzzing the gRPC side", () => {
  it.each(backends)("%s: every answer is a proper status; the server stays up, healthy and consistent", async (_name, args, maxCases) => {
    const budget = longRun > 0 ? { maxCases: longRun, maxMs: Number.POSITIVE_INFINITY } : { maxCases, maxMs: 10_000 };
    const result = await runFuzzSession(args(), fuzzGrpc, { seed, ...budget });
    const { report } = result;
    console.log(`seed ${seed}: ${report.cases} cases`, report.outcomes);
    expect(report.failures, `seed ${seed}`).toEqual([]);
    expect(report.cases).toBeGreaterThanOrEqual(Math.min(budget.maxCases, 500));
    // Both sides were reached: calls that worked and calls refused as bad input.
    expect(report.outcomes["OK"]).toBeGreaterThan(report.cases / 20);
    expect(report.outcomes["InvalidArgument"]).toBeGreaterThan(report.cases / 20);
    expect(result.alive).toBe(true);
    expect(result.healthz).toEqual({ status: 200, body: JSON.stringify({ status: "SERVING" }) });
    expect(result.grpcHealth).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect(result.sentinelsAfter).toEqual(result.sentinelsBefore);
    expect(result.violations).toEqual([]);
    expect(result.queueProblems).toEqual([]);
    expect(result.stderr).not.toMatch(/unexpected error|Error:/);
  }, longRun > 0 ? 3_600_000 : 60_000);
});
