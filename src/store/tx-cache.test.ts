import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect, it } from "vitest";
import { AttemptSchema, AttemptStatus, RolloutSchema, RolloutStatus, WorkerSchema, WorkerStatus } from "../gen/agl/v1/types_pb.js";
import type { StorageBackend } from "./backend.js";
import { createMemoryBackend } from "./backends/memory/memory-backend.js";
import { createSqliteBackend } from "./backends/sqlite/sqlite-backend.js";
import { withTxCache } from "./tx-cache.js";

const all = { descending: false, limit: -1, offset: 0 };
const backends: Array<[string, () => StorageBackend]> = [
  ["memory", () => createMemoryBackend()],
  ["sqlite", () => createSqliteBackend({ path: ":memory:" })],
];

let opened: StorageBackend | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

describe.each(backends)("transaction cache on %s", (_name, open) => {
  it("writes its pending rows before any read that passes through, and once at the end", async () => {
    const backend = open();
    opened = backend;
    await backend.transaction((tx) =>
      tx.insertRollouts([create(RolloutSchema, { rolloutId: "ro-1", status: RolloutStatus.QUEUING, startTime: 1 })]),
    );
    const seen = await backend.transaction(async (raw) => {
      const tx = withTxCache(raw);
      await tx.insertAttempt(create(AttemptSchema, { rolloutId: "ro-1", attemptId: "at-1", sequenceId: 1, startTime: 2 }));
      // One kind of row pending at each read.
      const rollout = await tx.getRollout("ro-1");
      await tx.putRollout({ ...rollout!, status: RolloutStatus.RUNNING });
      const rollouts = await tx.queryRollouts({ any: false }, all);
      const attempt = await tx.getAttempt("ro-1", "at-1");
      await tx.putAttempt({ ...attempt!, status: AttemptStatus.RUNNING, workerId: "w-1" });
      const attempts = await tx.queryAttempts("ro-1", all);
      await tx.putWorker(create(WorkerSchema, { workerId: "w-1", status: WorkerStatus.BUSY }));
      const workers = await tx.queryWorkers({ any: false }, all);
      // Nothing pending now: a second read sees the same.
      const again = await tx.queryRollouts({ any: false }, all);
      await tx.flush();
      return { rollouts, attempts, workers, again };
    });
    expect(seen.rollouts.items.map((r) => r.status)).toEqual([RolloutStatus.RUNNING]);
    expect(seen.again.items.map((r) => r.status)).toEqual([RolloutStatus.RUNNING]);
    expect(seen.attempts.items.map((a) => [a.status, a.workerId])).toEqual([[AttemptStatus.RUNNING, "w-1"]]);
    expect(seen.workers.items.map((w) => [w.workerId, w.status])).toEqual([["w-1", WorkerStatus.BUSY]]);
    const stored = await backend.transaction(async (tx) => (await tx.getRollout("ro-1"))?.status);
    expect(stored).toBe(RolloutStatus.RUNNING);
  });
});
