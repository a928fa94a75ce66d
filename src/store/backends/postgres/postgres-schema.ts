import type pg from "pg";
import { type SpanFacts, spanFacts } from "../../span-facts.js";
import { decodeSpan } from "../sql/stored-messages.js";

/**
 * Schema of the PostgreSQL backend, in its own schema (`agl` by default). It mirrors the SQLite one: every entity is
 * its protobuf binary (`data`) plus the columns that filters, sorts and joins need, and `seq` (a bigserial) is the
 * insertion order. Text columns use the "C" collation so that sorting is by code point, as in SQLite and memory,
 * whatever the database's locale.
 *
 * `resource_versions` keeps every published resources version: the history (QueryResourceVersions), and for several
 * servers on one database, what a server hands its watchers whole when NOTIFY (at most 8,000 bytes) only names it.
 */

/** Version of the schema this code writes; kept in the `schema_version` table. */
export const SCHEMA_VERSION = 4;

/** Migrations by the version they produce: `migrations[n - 1]` turns version n-1 into n. */
const migrations: string[] = [
  `
  CREATE TABLE rollouts (
    seq          bigserial        PRIMARY KEY,
    rollout_id   text COLLATE "C" NOT NULL UNIQUE,
    status       integer          NOT NULL,
    start_time   double precision NOT NULL,
    end_time     double precision,
    mode         integer          NOT NULL,
    resources_id text COLLATE "C" NOT NULL,
    group_id     text COLLATE "C" NOT NULL,
    data         bytea            NOT NULL
  );
  CREATE INDEX rollouts_status ON rollouts (status);
  CREATE INDEX rollouts_group ON rollouts (group_id);

  CREATE TABLE attempts (
    seq                 bigserial        PRIMARY KEY,
    rollout_id          text COLLATE "C" NOT NULL,
    attempt_id          text COLLATE "C" NOT NULL,
    sequence_id         bigint           NOT NULL,
    start_time          double precision NOT NULL,
    end_time            double precision,
    status              integer          NOT NULL,
    worker_id           text COLLATE "C" NOT NULL,
    last_heartbeat_time double precision,
    data                bytea            NOT NULL,
    UNIQUE (rollout_id, attempt_id),
    -- Also a guard: two transactions numbering a rollout's next attempt at once cannot both commit.
    UNIQUE (rollout_id, sequence_id)
  );

  -- FIFO of rollout ids; a rollout is at most once in the queue. Dequeue takes its head with SKIP LOCKED.
  CREATE TABLE queue (
    seq        bigserial        PRIMARY KEY,
    rollout_id text COLLATE "C" NOT NULL UNIQUE
  );

  CREATE TABLE spans (
    seq         bigserial        PRIMARY KEY,
    rollout_id  text COLLATE "C" NOT NULL,
    attempt_id  text COLLATE "C" NOT NULL,
    span_id     text COLLATE "C" NOT NULL,
    sequence_id bigint           NOT NULL,
    trace_id    text COLLATE "C" NOT NULL,
    parent_id   text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    start_time  double precision,
    end_time    double precision,
    data        bytea            NOT NULL,
    UNIQUE (rollout_id, attempt_id, span_id)
  );
  CREATE INDEX spans_sequence ON spans (rollout_id, sequence_id);

  -- Per-rollout span sequence counters: the last sequence id issued.
  CREATE TABLE span_counters (
    rollout_id text COLLATE "C" PRIMARY KEY,
    value      bigint           NOT NULL
  );

  CREATE TABLE resources (
    seq          bigserial        PRIMARY KEY,
    resources_id text COLLATE "C" NOT NULL UNIQUE,
    create_time  double precision NOT NULL,
    update_time  double precision NOT NULL,
    version      bigint           NOT NULL,
    data         bytea            NOT NULL
  );

  -- Recently published versions, for watchers on other servers (NOTIFY carries only id and version when large).
  CREATE TABLE resource_versions (
    seq          bigserial        PRIMARY KEY,
    resources_id text COLLATE "C" NOT NULL,
    version      bigint           NOT NULL,
    data         bytea            NOT NULL,
    UNIQUE (resources_id, version)
  );

  -- Single row (id = 1): the snapshot written last.
  CREATE TABLE latest_resources (
    id           integer          PRIMARY KEY CHECK (id = 1),
    resources_id text COLLATE "C" NOT NULL
  );

  CREATE TABLE workers (
    seq                 bigserial        PRIMARY KEY,
    worker_id           text COLLATE "C" NOT NULL UNIQUE,
    status              integer          NOT NULL,
    last_heartbeat_time double precision,
    last_dequeue_time   double precision,
    last_busy_time      double precision,
    last_idle_time      double precision,
    data                bytea            NOT NULL
  );
  `,
  // 2: what the dashboard's queries filter, sort and sum on. Spans stored before it get their facts in `backfills`.
  `
  ALTER TABLE rollouts ADD COLUMN resources_version bigint NOT NULL DEFAULT 0;
  CREATE INDEX attempts_latest ON attempts (rollout_id, sequence_id, attempt_id);
  -- With mode and status, the timeline counts from the index alone.
  CREATE INDEX rollouts_start ON rollouts (start_time, mode, status);
  CREATE INDEX rollouts_end ON rollouts (end_time, mode, status);
  CREATE INDEX rollouts_resources ON rollouts (resources_id, resources_version);

  ALTER TABLE spans ADD COLUMN reward double precision;
  ALTER TABLE spans ADD COLUMN llm_prompt_tokens bigint;
  ALTER TABLE spans ADD COLUMN llm_response_tokens bigint;
  -- Covering: the reward and token sums read these indexes only (and the latest attempt's id, below).
  CREATE INDEX spans_reward ON spans (rollout_id, attempt_id, sequence_id, reward) WHERE reward IS NOT NULL;
  CREATE INDEX spans_llm ON spans (rollout_id, llm_prompt_tokens, llm_response_tokens) WHERE llm_response_tokens IS NOT NULL;

  -- resource_versions now keeps every published version (the history); version 1 pruned it to the newest 1,000.
  INSERT INTO resource_versions (resources_id, version, data) SELECT resources_id, version, data FROM resources
    ON CONFLICT (resources_id, version) DO NOTHING;
  `,
  // 3: `rollouts_end` holds finished rollouts only (SQLite's version 4). An update that changes an indexed column adds
  // an entry to every index that takes the new row; a rollout's status changes before its end now add none here.
  // Every query that used the index still can: a range on end_time implies NOT NULL.
  `
  DROP INDEX rollouts_end;
  CREATE INDEX rollouts_end ON rollouts (end_time, mode, status) WHERE end_time IS NOT NULL;
  `,
  // 4: an LLM call's key (its response id; SQLite's version 5), so that the token sums count each call once however
  // many spans record it. Spans stored before it get theirs in \`backfills\`.
  `
  ALTER TABLE spans ADD COLUMN llm_call_key text COLLATE "C";
  DROP INDEX spans_llm;
  CREATE INDEX spans_llm ON spans (rollout_id, llm_call_key, llm_prompt_tokens, llm_response_tokens)
    WHERE llm_response_tokens IS NOT NULL;
  `,
];

/** Data steps of migrations, by the version they produce, run after its statements in the same transaction. */
const backfills: Record<number, (client: pg.ClientBase) => Promise<void>> = {
  2: (client) =>
    eachSpanBatch(client, "", async (seqs, facts) => {
      await client.query(
        "UPDATE spans SET reward = f.reward, llm_prompt_tokens = f.prompt, llm_response_tokens = f.response " +
          "FROM unnest($1::bigint[], $2::float8[], $3::bigint[], $4::bigint[]) AS f (seq, reward, prompt, response) " +
          "WHERE spans.seq = f.seq AND (f.reward IS NOT NULL OR f.response IS NOT NULL)",
        [seqs, facts.map((f) => f.reward), facts.map((f) => f.promptTokens), facts.map((f) => f.responseTokens)],
      );
    }),
  4: (client) =>
    eachSpanBatch(client, "AND llm_response_tokens IS NOT NULL", async (seqs, facts) => {
      await client.query(
        "UPDATE spans SET llm_call_key = f.call FROM unnest($1::bigint[], $2::text[]) AS f (seq, call) WHERE spans.seq = f.seq",
        [seqs, facts.map((f) => f.llmCallKey)],
      );
    }),
};

/** Calls `update` with the seqs and facts of the stored spans that meet `condition`, a batch at a time. */
async function eachSpanBatch(
  client: pg.ClientBase,
  condition: string,
  update: (seqs: string[], facts: SpanFacts[]) => Promise<void>,
): Promise<void> {
  for (let after = "0"; ; ) {
    const { rows } = await client.query<{ seq: string; data: Uint8Array }>(
      `SELECT seq, data FROM spans WHERE seq > $1 ${condition} ORDER BY seq LIMIT 1000`,
      [after],
    );
    if (rows.length === 0) return;
    await update(
      rows.map((row) => row.seq),
      rows.map((row) => spanFacts(decodeSpan(row.data))),
    );
    after = rows.at(-1)!.seq;
  }
}

/** A schema name that needs no quoting anywhere (it also names the NOTIFY channel and advisory lock keys). */
export function checkSchemaName(schema: string): void {
  if (!/^[a-z_][a-z0-9_]{0,47}$/.test(schema)) {
    throw new Error(`postgres store: schema must match [a-z_][a-z0-9_]{0,47}, got ${JSON.stringify(schema)}`);
  }
}

/**
 * Brings `schema` to `SCHEMA_VERSION` in one transaction. A transaction-level advisory lock serialises servers that
 * start together, so each migration runs once; a database newer than this program is refused.
 */
export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1)::bigint)", [`agl.migrate.${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_version (id integer PRIMARY KEY CHECK (id = 1), version integer NOT NULL)`,
    );
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${schema}.schema_version`);
    const current = rows[0]?.version ?? 0;
    if (current > SCHEMA_VERSION) {
      throw new Error(`postgres store: schema ${schema} has version ${current}, newer than this program's ${SCHEMA_VERSION}`);
    }
    for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
      await client.query(`SET LOCAL search_path TO ${schema}`);
      await client.query(migrations[version - 1]!);
      await backfills[version]?.(client);
    }
    if (current < SCHEMA_VERSION) {
      await client.query(
        `INSERT INTO ${schema}.schema_version (id, version) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
        [SCHEMA_VERSION],
      );
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
