import { encodeMessage } from "../../../encoding/generated-encoder.js";
import type Database from "better-sqlite3";
import { type Attempt, AttemptSchema, type ResourcesUpdate, ResourcesUpdateSchema, RolloutStatus } from "../../../gen/agl/v1/types_pb.js";
import { time } from "../sql/stored-messages.js";
import { ColumnUpdates } from "./sqlite-column-updates.js";

/** Prepared statements of the SQLite backend, and the mapping between messages and rows. */

/** Prepares the statements once per connection (plucked ones return the first column; raw ones, arrays). */
export function prepareStatements(db: Database.Database): Statements {
  const rolloutColumns =
    "rollout_id, status, start_time, end_time, mode, resources_id, resources_version, group_id, data) " +
    "VALUES (@rolloutId, @status, @startTime, @endTime, @mode, @resourcesId, @resourcesVersion, @groupId, @data)";
  const attemptColumns =
    "rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, last_heartbeat_time, data) " +
    "VALUES (@rolloutId, @attemptId, @sequenceId, @startTime, @endTime, @status, @workerId, @lastHeartbeatTime, @data)";
  const resourcesColumns =
    "resources_id, create_time, update_time, version, data) " + "VALUES (@resourcesId, @createTime, @updateTime, @version, @data)";
  return {
    begin: db.prepare("BEGIN IMMEDIATE"),
    commit: db.prepare("COMMIT"),
    rollback: db.prepare("ROLLBACK"),
    dataVersion: db.prepare("PRAGMA data_version").pluck(),

    insertRollout: db.prepare(`INSERT INTO rollouts (${rolloutColumns}`),
    putRollout: db.prepare(
      `INSERT INTO rollouts (${rolloutColumns} ON CONFLICT (rollout_id) DO UPDATE SET status = excluded.status, ` +
        "start_time = excluded.start_time, end_time = excluded.end_time, mode = excluded.mode, " +
        "resources_id = excluded.resources_id, resources_version = excluded.resources_version, " +
        "group_id = excluded.group_id, data = excluded.data",
    ),
    getRollout: db.prepare("SELECT data FROM rollouts WHERE rollout_id = ?").pluck(),
    activeRollouts: db
      .prepare(`SELECT data FROM rollouts WHERE status IN (${RolloutStatus.PREPARING}, ${RolloutStatus.RUNNING}) ORDER BY seq`)
      .pluck(),

    insertAttempt: db.prepare(`INSERT INTO attempts (${attemptColumns}`),
    putAttempt: db.prepare(
      `INSERT INTO attempts (${attemptColumns} ON CONFLICT (rollout_id, attempt_id) DO UPDATE SET ` +
        "sequence_id = excluded.sequence_id, start_time = excluded.start_time, end_time = excluded.end_time, " +
        "status = excluded.status, worker_id = excluded.worker_id, " +
        "last_heartbeat_time = excluded.last_heartbeat_time, data = excluded.data",
    ),
    getAttempt: db.prepare("SELECT data FROM attempts WHERE rollout_id = ? AND attempt_id = ?").pluck(),
    // Sequence ids are unique per rollout; the tie-break follows the index (rollout_id, sequence_id, attempt_id), so
    // the row is read from it without a sort (by seq it took a temporary B-tree: 18 µs a call against 13 µs).
    latestAttempt: db.prepare("SELECT data FROM attempts WHERE rollout_id = ? ORDER BY sequence_id DESC, attempt_id DESC LIMIT 1").pluck(),

    enqueue: db.prepare("INSERT INTO queue (rollout_id) VALUES (?) ON CONFLICT (rollout_id) DO NOTHING"),
    // `LIMIT +?`, not `LIMIT ?`: SQLite's planner may use a bare parameter's value, so every bind of it recompiles the
    // statement (7 µs a dequeue, five times the query); an expression it leaves alone. The plan is a scan either way.
    queueHead: db.prepare("SELECT seq, rollout_id FROM queue ORDER BY seq LIMIT +?").raw(),
    dequeueThrough: db.prepare("DELETE FROM queue WHERE seq <= ?"),

    insertSpan: db.prepare(
      "INSERT INTO spans (rollout_id, attempt_id, span_id, sequence_id, trace_id, parent_id, name, start_time, " +
        "end_time, reward, llm_prompt_tokens, llm_response_tokens, llm_call_key, data) " +
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) " +
        "ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING",
    ),
    spanSequenceId: db.prepare("SELECT sequence_id FROM spans WHERE rollout_id = ? AND attempt_id = ? AND span_id = ?").pluck(),
    lastSequenceId: db
      .prepare(
        "SELECT max(coalesce((SELECT value FROM span_counters WHERE rollout_id = ?), 0), " +
          "coalesce((SELECT max(sequence_id) FROM spans WHERE rollout_id = ?), 0))",
      )
      .pluck(),
    raiseSequenceId: db.prepare(
      "INSERT INTO span_counters (rollout_id, value) VALUES (?, ?) " +
        "ON CONFLICT (rollout_id) DO UPDATE SET value = max(value, excluded.value)",
    ),

    insertResources: db.prepare(`INSERT INTO resources (${resourcesColumns}`),
    putResources: db.prepare(
      `INSERT INTO resources (${resourcesColumns} ON CONFLICT (resources_id) DO UPDATE SET ` +
        "create_time = excluded.create_time, update_time = excluded.update_time, version = excluded.version, " +
        "data = excluded.data",
    ),
    setLatestResources: db.prepare(
      "INSERT INTO latest_resources (id, resources_id) VALUES (1, ?) " +
        "ON CONFLICT (id) DO UPDATE SET resources_id = excluded.resources_id",
    ),
    getResources: db.prepare("SELECT data FROM resources WHERE resources_id = ?").pluck(),
    putResourceVersion: db.prepare(
      "INSERT INTO resource_versions (resources_id, version, data) VALUES (?, ?, ?) " +
        "ON CONFLICT (resources_id, version) DO UPDATE SET data = excluded.data",
    ),
    getResourceVersion: db.prepare("SELECT data FROM resource_versions WHERE resources_id = ? AND version = ?").pluck(),
    latestResources: db.prepare("SELECT r.data FROM latest_resources l JOIN resources r ON r.resources_id = l.resources_id").pluck(),

    getWorker: db.prepare("SELECT data FROM workers WHERE worker_id = ?").pluck(),
    putWorker: db.prepare(
      "INSERT INTO workers (worker_id, status, last_heartbeat_time, last_dequeue_time, last_busy_time, " +
        "last_idle_time, data) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (worker_id) DO UPDATE SET " +
        "status = excluded.status, last_heartbeat_time = excluded.last_heartbeat_time, " +
        "last_dequeue_time = excluded.last_dequeue_time, last_busy_time = excluded.last_busy_time, " +
        "last_idle_time = excluded.last_idle_time, data = excluded.data",
    ),

    counts: db
      .prepare(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM attempts), (SELECT count(*) FROM spans), " +
          "(SELECT count(*) FROM resources), (SELECT count(*) FROM workers), (SELECT count(*) FROM queue)",
      )
      .raw(),
    rolloutsByStatus: db.prepare("SELECT status, count(*) FROM rollouts GROUP BY status").raw(),
    firstRolloutStart: db.prepare("SELECT min(start_time) FROM rollouts").pluck(),
  };
}

/**
 * The rewrites of rollouts and attempts that set only what changed (their rows as `rolloutRow` and `attemptRow` give
 * them), falling back on the statements' upserts.
 */
export function prepareColumnUpdates(db: Database.Database, s: Statements) {
  const rollouts = [
    ["status", "status"],
    ["start_time", "startTime"],
    ["end_time", "endTime"],
    ["mode", "mode"],
    ["resources_id", "resourcesId"],
    ["resources_version", "resourcesVersion"],
    ["group_id", "groupId"],
  ] as const;
  const attempts = [
    ["sequence_id", "sequenceId"],
    ["start_time", "startTime"],
    ["end_time", "endTime"],
    ["status", "status"],
    ["worker_id", "workerId"],
    ["last_heartbeat_time", "lastHeartbeatTime"],
  ] as const;
  return {
    rollouts: new ColumnUpdates(db, "rollouts", [["rollout_id", "rolloutId"]], rollouts, s.putRollout),
    attempts: new ColumnUpdates(
      db,
      "attempts",
      [
        ["rollout_id", "rolloutId"],
        ["attempt_id", "attemptId"],
      ],
      attempts,
      s.putAttempt,
    ),
  };
}

export type RowUpdates = ReturnType<typeof prepareColumnUpdates>;

/** Every statement the backend runs besides the queries built per filter (see sqlite-queries). */
export type Statements = Record<StatementName, Database.Statement>;

type StatementName =
  | "begin"
  | "commit"
  | "rollback"
  | "dataVersion"
  | "insertRollout"
  | "putRollout"
  | "getRollout"
  | "activeRollouts"
  | "insertAttempt"
  | "putAttempt"
  | "getAttempt"
  | "latestAttempt"
  | "enqueue"
  | "queueHead"
  | "dequeueThrough"
  | "insertSpan"
  | "spanSequenceId"
  | "lastSequenceId"
  | "raiseSequenceId"
  | "insertResources"
  | "putResources"
  | "setLatestResources"
  | "getResources"
  | "putResourceVersion"
  | "getResourceVersion"
  | "latestResources"
  | "getWorker"
  | "putWorker"
  | "counts"
  | "rolloutsByStatus"
  | "firstRolloutStart";

export function attemptRow(attempt: Attempt) {
  return {
    rolloutId: attempt.rolloutId,
    attemptId: attempt.attemptId,
    sequenceId: attempt.sequenceId,
    startTime: attempt.startTime,
    endTime: time(attempt.endTime),
    status: attempt.status,
    workerId: attempt.workerId,
    lastHeartbeatTime: time(attempt.lastHeartbeatTime),
    data: encodeMessage(AttemptSchema, attempt),
  };
}

export function resourcesRow(update: ResourcesUpdate) {
  return {
    resourcesId: update.resourcesId,
    createTime: update.createTime,
    updateTime: update.updateTime,
    version: update.version,
    data: encodeMessage(ResourcesUpdateSchema, update),
  };
}
