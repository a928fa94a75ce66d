import type Database from "better-sqlite3";
import { type SpanFacts, spanFacts } from "../../span-facts.js";
import { decodeSpan } from "../sql/stored-messages.js";

/**
 * Schema of the SQLite backend. Every entity is stored as its protobuf binary (`data`) plus the columns that filters,
 * sorts and joins need. `seq` (an alias of the rowid) is the insertion order: rows are never deleted from the entity
 * tables and replacements are upserts (`ON CONFLICT DO UPDATE`), which keep the row and hence its `seq`.
 *
 * Column names equal the proto field names, so a validated `sort_by` maps to a column directly (see sqlite-queries).
 * No foreign keys: the store core keeps referential integrity, and FK checks would cost a lookup per inserted span.
 */

/** Version of the schema this code writes; kept in `PRAGMA user_version`. */
export const SCHEMA_VERSION = 5;

/**
 * Migrations, by the version they produce: `migrations[n - 1]` turns version n-1 into n. Version 1 is the initial
 * schema; every statement is idempotent so a half-created database (version 0) is completed safely.
 */
const migrations: string[] = [
  `
  CREATE TABLE IF NOT EXISTS rollouts (
    seq          INTEGER PRIMARY KEY,
    rollout_id   TEXT    NOT NULL UNIQUE,
    status       INTEGER NOT NULL,
    start_time   REAL    NOT NULL,
    end_time     REAL,
    mode         INTEGER NOT NULL,
    resources_id TEXT    NOT NULL,
    group_id     TEXT    NOT NULL,
    data         BLOB    NOT NULL
  );
  CREATE INDEX IF NOT EXISTS rollouts_status ON rollouts (status);
  CREATE INDEX IF NOT EXISTS rollouts_group ON rollouts (group_id);

  CREATE TABLE IF NOT EXISTS attempts (
    seq                 INTEGER PRIMARY KEY,
    rollout_id          TEXT    NOT NULL,
    attempt_id          TEXT    NOT NULL,
    sequence_id         INTEGER NOT NULL,
    start_time          REAL    NOT NULL,
    end_time            REAL,
    status              INTEGER NOT NULL,
    worker_id           TEXT    NOT NULL,
    last_heartbeat_time REAL,
    data                BLOB    NOT NULL,
    UNIQUE (rollout_id, attempt_id)
  );
  CREATE INDEX IF NOT EXISTS attempts_sequence ON attempts (rollout_id, sequence_id);

  -- FIFO of rollout ids; a rollout is at most once in the queue.
  CREATE TABLE IF NOT EXISTS queue (
    seq        INTEGER PRIMARY KEY,
    rollout_id TEXT    NOT NULL UNIQUE
  );

  CREATE TABLE IF NOT EXISTS spans (
    seq         INTEGER PRIMARY KEY,
    rollout_id  TEXT    NOT NULL,
    attempt_id  TEXT    NOT NULL,
    span_id     TEXT    NOT NULL,
    sequence_id INTEGER NOT NULL,
    trace_id    TEXT    NOT NULL,
    parent_id   TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    start_time  REAL,
    end_time    REAL,
    data        BLOB    NOT NULL,
    UNIQUE (rollout_id, attempt_id, span_id)
  );
  CREATE INDEX IF NOT EXISTS spans_sequence ON spans (rollout_id, sequence_id);

  -- Per-rollout span sequence counters: the last sequence id issued, where no stored span holds it (version 3).
  CREATE TABLE IF NOT EXISTS span_counters (
    rollout_id TEXT    PRIMARY KEY,
    value      INTEGER NOT NULL
  ) WITHOUT ROWID;

  CREATE TABLE IF NOT EXISTS resources (
    seq          INTEGER PRIMARY KEY,
    resources_id TEXT    NOT NULL UNIQUE,
    create_time  REAL    NOT NULL,
    update_time  REAL    NOT NULL,
    version      INTEGER NOT NULL,
    data         BLOB    NOT NULL
  );

  -- Single row (id = 1): the snapshot written last.
  CREATE TABLE IF NOT EXISTS latest_resources (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    resources_id TEXT    NOT NULL
  );

  CREATE TABLE IF NOT EXISTS workers (
    seq                 INTEGER PRIMARY KEY,
    worker_id           TEXT    NOT NULL UNIQUE,
    status              INTEGER NOT NULL,
    last_heartbeat_time REAL,
    last_dequeue_time   REAL,
    last_busy_time      REAL,
    last_idle_time      REAL,
    data                BLOB    NOT NULL
  );
  `,
  // 2: what the dashboard's queries filter, sort and sum on. Spans stored before it get their facts in `backfill`.
  `
  ALTER TABLE rollouts ADD COLUMN resources_version INTEGER NOT NULL DEFAULT 0;
  DROP INDEX attempts_sequence;
  CREATE INDEX attempts_sequence ON attempts (rollout_id, sequence_id, attempt_id);
  -- With mode and status, the timeline counts from the index alone.
  CREATE INDEX rollouts_start ON rollouts (start_time, mode, status);
  CREATE INDEX rollouts_end ON rollouts (end_time, mode, status);
  CREATE INDEX rollouts_resources ON rollouts (resources_id, resources_version);

  ALTER TABLE spans ADD COLUMN reward REAL;
  ALTER TABLE spans ADD COLUMN llm_prompt_tokens INTEGER;
  ALTER TABLE spans ADD COLUMN llm_response_tokens INTEGER;
  -- Covering: the reward and token sums read these indexes only (and the latest attempt's id, below).
  CREATE INDEX spans_reward ON spans (rollout_id, attempt_id, sequence_id, reward) WHERE reward IS NOT NULL;
  CREATE INDEX spans_llm ON spans (rollout_id, llm_prompt_tokens, llm_response_tokens) WHERE llm_response_tokens IS NOT NULL;

  -- Every published version of each snapshot (resources holds the current one); before version 2, only those.
  CREATE TABLE resource_versions (
    seq          INTEGER PRIMARY KEY,
    resources_id TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    data         BLOB    NOT NULL,
    UNIQUE (resources_id, version)
  );
  INSERT INTO resource_versions (resources_id, version, data) SELECT resources_id, version, data FROM resources ORDER BY seq;
  `,
  // 3: a rollout's last sequence id is the larger of its counter and its spans' largest id, and a call that stores a
  // span under its counter's new value leaves the counter as it was. No table changes; the version keeps a program of
  // version 2, which reads the counters alone, from giving ids twice.
  "",
  // 4: `rollouts_end` holds finished rollouts only. Each status change of an unfinished rollout rewrote its entry
  // among the NULLs (two B-tree writes, and often a WAL frame); now it gets one entry, when it ends, at the index's
  // end. Every query that used the index still does: a range on end_time implies NOT NULL, and no list sorted by
  // end_time could use it (NULLs last, ties by seq), partial or not.
  `
  DROP INDEX rollouts_end;
  CREATE INDEX rollouts_end ON rollouts (end_time, mode, status) WHERE end_time IS NOT NULL;
  `,
  // 5: an LLM call's key (its response id), so that the token sums count each call once however many spans record
  // it (the proxy's and the client's). Spans stored before it get theirs in \`backfills\`.
  `
  ALTER TABLE spans ADD COLUMN llm_call_key TEXT;
  DROP INDEX spans_llm;
  CREATE INDEX spans_llm ON spans (rollout_id, llm_call_key, llm_prompt_tokens, llm_response_tokens)
    WHERE llm_response_tokens IS NOT NULL;
  `,
];

/** Data steps of migrations, by the version they produce, run after its statements in the same transaction. */
const backfills: Record<number, (db: Database.Database) => void> = {
  2: (db) => {
    const update = db.prepare("UPDATE spans SET reward = ?, llm_prompt_tokens = ?, llm_response_tokens = ? WHERE seq = ?");
    eachSpan(db, "", (seq, facts) => {
      if (facts.reward !== null || facts.responseTokens !== null) update.run(facts.reward, facts.promptTokens, facts.responseTokens, seq);
    });
  },
  5: (db) => {
    const update = db.prepare("UPDATE spans SET llm_call_key = ? WHERE seq = ?");
    eachSpan(db, "AND llm_response_tokens IS NOT NULL", (seq, facts) => update.run(facts.llmCallKey, seq));
  },
};

/** Calls `visit` with the facts of each stored span that meets `condition`, in batches. */
function eachSpan(db: Database.Database, condition: string, visit: (seq: number, facts: SpanFacts) => void): void {
  // In batches: better-sqlite3 cannot write while a statement is being iterated.
  const batch = db.prepare(`SELECT seq, data FROM spans WHERE seq > ? ${condition} ORDER BY seq LIMIT 1000`).raw();
  for (let rows = batch.all(0) as Array<[number, Uint8Array]>; rows.length > 0; rows = batch.all(rows.at(-1)![0]) as typeof rows) {
    for (const [seq, data] of rows) visit(seq, spanFacts(decodeSpan(data)));
  }
}

/**
 * Sets the connection's pragmas and brings the schema to `SCHEMA_VERSION`.
 *
 * Durability: WAL with `synchronous = NORMAL`. A committed transaction has been written (write(2)) to the WAL file
 * before COMMIT returns; the WAL is fsynced only at checkpoints. Data handed to the kernel survives the death of the
 * process, so a kill -9 of the server never loses an acknowledged write; only an OS crash or power loss can lose the
 * last commits (never corrupting the database). That is the guarantee we promise, at a fraction of FULL's fsyncs.
 */
export function openSchema(db: Database.Database): void {
  // A new database gets pages of 8 KiB (SQLite's default is 4): a span of 1 KB takes a leaf of its own less often,
  // and the ~10 KB span of an LLM call two pages rather than three, so each COMMIT writes fewer WAL frames (6 % less
  // of the demo's store CPU a rollout, 3 % of bench/store's; docs/benchmarks.md). A database already written keeps
  // its page size; it can only be set before the first table, and before WAL mode.
  if (db.pragma("page_count", { simple: true }) === 0) db.pragma("page_size = 8192");
  db.pragma("journal_mode = WAL"); // ":memory:" databases answer "memory"; that is fine.
  db.pragma("synchronous = NORMAL");
  // Other processes (a CLI reading the file, a second server) may hold the lock briefly: wait instead of failing.
  db.pragma("busy_timeout = 5000");
  db.pragma("foreign_keys = OFF");
  db.pragma("temp_store = MEMORY");

  const current = db.pragma("user_version", { simple: true }) as number;
  if (current > SCHEMA_VERSION) {
    throw new Error(`sqlite store: the database has schema version ${current}, newer than this program's ${SCHEMA_VERSION}`);
  }
  const migrate = db.transaction(() => {
    for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
      db.exec(migrations[version - 1]!);
      backfills[version]?.(db);
    }
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  });
  if (current < SCHEMA_VERSION) migrate.immediate();
}
