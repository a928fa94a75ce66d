/**
 * The fuzz suite both sides share: one seeded session per storage backend against a real `agl serve` process, and
 * what must hold afterwards. The seed is printed; AGL_FUZZ_SEED=<seed> replays a run, AGL_FUZZ_CASES=<n> fuzzes
 * longer (n cases per backend, no time cap) to hunt for bugs by hand.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { HealthCheckResponse_ServingStatus } from "../../../src/gen/grpc/health/v1/health_pb.js";
import { dropSchema, freshSchema, postgresUrl } from "../postgres.js";
import type { FuzzOptions } from "./grpc-fuzz.js";
import { runFuzzSession } from "./fuzz-session.js";
import type { FuzzReport } from "./fuzz-methods.js";
import { fuzzSeed } from "./prng.js";

export function describeFuzz(side: string, fuzz: (options: FuzzOptions) => Promise<FuzzReport>): void {
  const seed = fuzzSeed();
  const longRun = Number(process.env.AGL_FUZZ_CASES ?? 0);
  console.log(`${side} fuzz seed ${seed} (AGL_FUZZ_SEED=${seed} replays it)`);
  const dir = mkdtempSync(join(tmpdir(), "agl-fuzz-"));
  const schemas: string[] = [];
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    for (const schema of schemas) await dropSchema(schema);
  });

  const backends: Array<[string, () => string[], number]> = [
    ["memory", () => ["--memory"], 3_000],
    ["SQLite", () => ["--database", join(dir, "fuzz.db")], 3_000],
    [
      "PostgreSQL",
      () => {
        const schema = freshSchema();
        schemas.push(schema);
        return ["--database", `${postgresUrl()}?schema=${schema}`];
      },
      1_500,
    ],
  ];

  describe(`fuzzing the ${side} side`, () => {
    it.each(backends)(
      "%s: every answer is a proper status; the server stays up, healthy and consistent",
      async (_name, args, maxCases) => {
        const budget = longRun > 0 ? { maxCases: longRun, maxMs: Number.POSITIVE_INFINITY } : { maxCases, maxMs: 10_000 };
        const result = await runFuzzSession(args(), fuzz, { seed, ...budget });
        const { report } = result;
        console.log(`seed ${seed}: ${report.cases} cases`, report.outcomes);
        expect(report.failures, `seed ${seed}`).toEqual([]);
        expect(report.cases).toBeGreaterThanOrEqual(Math.min(budget.maxCases, 500));
        // Both sides were reached: calls that worked and calls refused as bad input.
        expect(report.outcomes.OK).toBeGreaterThan(report.cases / 20);
        expect(report.outcomes.InvalidArgument).toBeGreaterThan(report.cases / 20);
        expect(report.outcomes.dropped).toBeUndefined();
        expect(result.alive).toBe(true);
        expect(result.healthz).toEqual({ status: 200, body: JSON.stringify({ status: "SERVING" }) });
        expect(result.grpcHealth).toBe(HealthCheckResponse_ServingStatus.SERVING);
        expect(result.sentinelsAfter).toEqual(result.sentinelsBefore);
        expect(result.violations).toEqual([]);
        expect(result.queueProblems).toEqual([]);
        expect(result.stderr).not.toMatch(/unexpected error|Error:/);
      },
      longRun > 0 ? 3_600_000 : 60_000,
    );
  });
}
