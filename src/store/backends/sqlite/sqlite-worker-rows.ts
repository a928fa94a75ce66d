import { create, type JsonObject } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { decodeMessage } from "../../../encoding/generated-decoder.js";
import { encodeMessage } from "../../../encoding/generated-encoder.js";
import type { Statement } from "better-sqlite3";
import { type Worker, WorkerSchema } from "../../../gen/agl/v1/types_pb.js";
import { frozenCopy } from "../../deep-copy.js";
import { time } from "../sql/stored-messages.js";

/**
 * A worker's row is read and rewritten at each claim and at each attempt's end, and its heartbeat stats (a Struct of
 * the runner's figures, some twenty entries) took most of the time of both: the demo's worker row took 5.9–6.9 µs to
 * decode, change and encode again, 1.6–2.2 µs this way. The stats change only with a heartbeat, so here they are
 * decoded and encoded once per heartbeat. The workers read from one stored row share one deeply frozen stats object (a
 * write replaces a worker's stats, never edits them), and the encoded value of such an object is remembered.
 *
 * The row cache keeps the bytes it stored or read, so a row's bytes are the key of the worker they hold.
 */
const workersOf = new WeakMap<Uint8Array, Worker>();

/** Stats objects made here (frozen copies), each with its encoded value (length-prefixed) once known. */
const ownStats = new WeakMap<JsonObject, { value?: Uint8Array }>();
const statsField = WorkerSchema.field.heartbeatStats;

function ownCopy(stats: JsonObject): JsonObject {
  if (ownStats.has(stats)) return stats;
  const copy = frozenCopy(stats);
  ownStats.set(copy, {});
  return copy;
}

/** The bytes a worker is stored as; with stats made here, their field comes last (decoders take fields in any order). */
export function encodeWorker(worker: Worker): Uint8Array {
  const stats = worker.heartbeatStats;
  const own = stats && ownStats.get(stats);
  let data: Uint8Array;
  if (own === undefined) data = encodeMessage(WorkerSchema, worker);
  else {
    // The field's length and bytes (after its one-byte tag), written as protobuf-es writes an unknown field: as is.
    own.value ??= encodeMessage(WorkerSchema, create(WorkerSchema, { heartbeatStats: stats })).subarray(1);
    const field = { no: statsField.number, wireType: WireType.LengthDelimited, data: own.value };
    data = encodeMessage(WorkerSchema, { ...worker, heartbeatStats: undefined, $unknown: [...(worker.$unknown ?? []), field] });
  }
  workersOf.set(data, { ...worker, heartbeatStats: stats && ownCopy(stats) });
  return data;
}

/** The worker stored as `data`: a copy of its own (its stats shared and frozen), so a caller may change its fields. */
export function decodeWorker(data: Uint8Array): Worker {
  let worker = workersOf.get(data);
  if (worker === undefined) {
    worker = decodeMessage(WorkerSchema, data);
    if (worker.heartbeatStats) worker.heartbeatStats = ownCopy(worker.heartbeatStats);
    workersOf.set(data, worker);
  }
  return { ...worker };
}

/**
 * Worker rows the open group of calls wrote and the file does not hold yet: each worker's last write, as the
 * arguments of its upsert. A worker's row is rewritten at each claim and at each attempt's end, so where one runner
 * runs many rollouts at once (`agl train`'s pool: 64 under one worker id) the calls of one group rewrote the same row
 * again and again: in 20 steps of the demo, 2,815 writes in 1,343 groups, 623 of them distinct. The group writes each
 * row once, before its COMMIT, or before a statement that reads the table. A failed write then fails the group, as a
 * failed COMMIT does.
 */
export class PendingWorkerRows {
  private readonly rows = new Map<string, { upsert: unknown[]; data: Uint8Array }>();

  /** `worker`, stored as `data`: written with the group (a later write of the same worker replaces it). */
  set(worker: Worker, data: Uint8Array): void {
    const { workerId, status, lastHeartbeatTime, lastDequeueTime, lastBusyTime, lastIdleTime } = worker;
    const upsert = [workerId, status, time(lastHeartbeatTime), time(lastDequeueTime), time(lastBusyTime), time(lastIdleTime), data];
    this.rows.set(workerId, { upsert, data });
  }

  /** The bytes of the worker's pending row, if it has one. */
  dataOf(workerId: string): Uint8Array | undefined {
    return this.rows.get(workerId)?.data;
  }

  /** Writes the pending rows with `put` (the upsert), in the order their workers were first written. */
  write(put: Statement): void {
    for (const { upsert } of this.rows.values()) put.run(...upsert);
    this.rows.clear();
  }

  /** Forgets them: the group's transaction was rolled back. */
  clear(): void {
    this.rows.clear();
  }
}
