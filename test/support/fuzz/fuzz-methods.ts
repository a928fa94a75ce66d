/** What the fuzzers call and how they judge the answers, shared by the gRPC and the Connect fuzzer. */
import type { DescMethod } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ResourceService } from "../../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../../src/gen/agl/v1/store_pb.js";
import { TripletService } from "../../../src/gen/agl/v1/triplets_pb.js";
import type { IdPool } from "./random-message.js";

/** Every method of the store's services (unary, server-streaming and the bidirectional AddSpansStream). */
export const fuzzedMethods: readonly DescMethod[] = [LightningStore, ResourceService, TripletService].flatMap((s) => s.methods);

/**
 * Codes a server may answer a bad or strange request with. Not among them: UNKNOWN and INTERNAL (a bug reached the
 * client), UNAVAILABLE (the server or connection went away), DATA_LOSS, UNAUTHENTICATED (no token is configured).
 */
export const acceptableCodes: ReadonlySet<Code> = new Set([
  Code.Canceled,
  Code.InvalidArgument,
  Code.DeadlineExceeded,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.ResourceExhausted,
  Code.FailedPrecondition,
  Code.Aborted,
  Code.OutOfRange,
  Code.Unimplemented,
]);

/** Tallies answers by outcome, keeps the unacceptable ones (with what reproduces them). */
export interface FuzzReport {
  seed: number;
  cases: number;
  outcomes: Record<string, number>;
  /** Unacceptable answers by outcome. */
  failed: Record<string, number>;
  /** The first few unacceptable answers of each outcome, with what reproduces them. */
  failures: string[];
}

export const newReport = (seed: number): FuzzReport => ({ seed, cases: 0, outcomes: {}, failed: {}, failures: [] });

/** Counts an outcome; keeps the first few failures of each outcome (so that one kind cannot hide the others). */
export function record(report: FuzzReport, outcome: string, failure?: string): void {
  const seen = report.outcomes[outcome] ?? 0;
  report.outcomes[outcome] = seen + 1;
  if (failure === undefined) return;
  const kept = (report.failed[outcome] ?? 0) + 1;
  report.failed[outcome] = kept;
  if (kept <= 3 && report.failures.length < 30) report.failures.push(failure);
}

const keep = <T>(list: T[], item: T, max = 200) => {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
};

/**
 * Adds the ids in an answer to the pool, except `protectedIds` (the sentinels the fuzzer must never name). Answers
 * are plain protobuf-es objects: any object with `rolloutId` (and `attemptId`) holds ids.
 */
export function harvestIds(value: unknown, pool: IdPool, protectedIds: ReadonlySet<string>, depth = 0): void {
  if (value === null || typeof value !== "object" || depth > 8) return;
  if (Array.isArray(value)) {
    for (const item of value.slice(0, 50)) harvestIds(item, pool, protectedIds, depth + 1);
    return;
  }
  const o = value as Record<string, unknown>;
  const str = (key: string) =>
    typeof o[key] === "string" && o[key] !== "" && !protectedIds.has(o[key] as string) ? (o[key] as string) : undefined;
  const rolloutId = str("rolloutId");
  const attemptId = str("attemptId");
  if (rolloutId !== undefined) {
    if (!pool.rollouts.includes(rolloutId)) keep(pool.rollouts, rolloutId);
    if (attemptId !== undefined && !pool.attempts.some(([r, a]) => r === rolloutId && a === attemptId))
      keep(pool.attempts, [rolloutId, attemptId]);
  }
  for (const [key, list] of [
    ["resourcesId", pool.resources],
    ["workerId", pool.workers],
    ["groupId", pool.groups],
  ] as const) {
    const id = str(key);
    if (id !== undefined && !list.includes(id)) keep(list, id);
  }
  for (const [key, child] of Object.entries(o))
    if (key !== "$typeName" && typeof child === "object") harvestIds(child, pool, protectedIds, depth + 1);
}

/** Long-polls and streams: they run until their (short) deadline. */
export const isSlowMethod = (method: DescMethod | undefined) =>
  method !== undefined &&
  (method.methodKind === "server_streaming" || method.name === "DequeueRollouts" || method.name === "WaitForRollouts");

/**
 * Runs cases in batches of `concurrency`, judging each batch in order before making the next, so that the same seed
 * makes the same cases (ids harvested from answers feed later cases). Slow cases (long-polls, streams) do not hold a
 * batch up: they run detached, at most `concurrency` at once, and are judged when they end, without harvesting.
 */
export async function runCases<C, A>(
  budget: { maxCases: number; maxMs: number; concurrency?: number },
  make: (index: number) => C,
  slow: (c: C) => boolean,
  exec: (c: C) => Promise<A>,
  judge: (c: C, answer: A, harvest: boolean) => void,
): Promise<number> {
  const concurrency = budget.concurrency ?? 16;
  const until = Date.now() + budget.maxMs;
  const detached = new Set<Promise<void>>();
  let made = 0;
  while (made < budget.maxCases && Date.now() < until) {
    const batch = Array.from({ length: Math.min(concurrency, budget.maxCases - made) }, () => make(made++));
    const fast: Array<[C, Promise<A>]> = [];
    for (const c of batch) {
      if (!slow(c)) {
        fast.push([c, exec(c)]);
        continue;
      }
      while (detached.size >= concurrency) await Promise.race(detached);
      const running: Promise<void> = exec(c).then((answer) => {
        detached.delete(running);
        judge(c, answer, false);
      });
      detached.add(running);
    }
    for (const [c, answer] of fast) judge(c, await answer, true);
  }
  await Promise.all(detached);
  return made;
}
