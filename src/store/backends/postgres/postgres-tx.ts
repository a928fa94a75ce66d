import { encodeMessage } from "../../../encoding/generated-encoder.js";
import {
  type Attempt,
  type ResourcesUpdate,
  type Rollout,
  RolloutStatus,
  type Span,
  type Worker,
  WorkerSchema,
} from "../../../gen/agl/v1/types_pb.js";
import {
  type PageResult,
  type PageSpec,
  type ResourcesFilter,
  type RewardGroup,
  type RolloutFilter,
  type RolloutScope,
  type SpanFilter,
  type StorageCounts,
  type StorageTx,
  type StoreEvent,
  type Timeline,
  type TimelineQuery,
  type WorkerFilter,
  spanKey,
} from "../../backend.js";
import {
  aggregatesOf,
  attemptWhere,
  queryPage,
  resourcesWhere,
  resourceVersionsWhere,
  rolloutWhere,
  spanWhere,
  workerWhere,
} from "./postgres-queries.js";
import { bucketCount, finalRewards, rewardGroups } from "../sql/aggregate-rows.js";
import type { StatementPipeline } from "./postgres-pipeline.js";
import { attemptRow, resourcesRow, versionKey } from "./postgres-rows.js";
import { encodeSpan, factsOf } from "../../span-wire.js";
import { decodeAttempt, decodeResources, decodeRollout, decodeSpan, decodeWorker, rolloutRow, time } from "../sql/stored-messages.js";

/**
 * How a run of a transaction protects what it reads and writes back (see postgres-backend.ts): "snapshot" reads
 * without locks (REPEATABLE READ detects conflicting writes); "rows" locks the rollout, worker and resources rows
 * it reads. Attempts are not locked: every transaction that writes an attempt has read, and so locked, its rollout.
 */
export type Locking = "snapshot" | "rows";

/** One transaction of the PostgreSQL backend, on one pooled connection (its statements pipelined). */
export class PostgresTx implements StorageTx {
  /** Cleared when the transaction ends: a leaked tx must not write outside its transaction. */
  open = true;
  readonly events: StoreEvent[] = [];
  /** resource_versions.seq of each version written, for the notification that announces it. */
  readonly versionSeqs = new Map<string, number>();
  private readonly forUpdate: string;

  constructor(
    /** Where the statements go; the backend sends BEGIN and the notifications through it too. */
    private readonly pipeline: StatementPipeline,
    private readonly schema: string,
    locking: Locking,
    private readonly watchdogLockKey: string,
  ) {
    this.forUpdate = locking === "rows" ? " FOR UPDATE" : "";
  }

  /** The latest attempt of each rollout read by `getRollout` (null: none), kept current by this transaction's writes. */
  private readonly latestKnown = new Map<string, { attemptId: string; sequenceId: number; data: Uint8Array } | null>();

  /** Runs a statement and returns its rows. */
  private readonly run = async (text: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> => {
    this.check();
    return this.pipeline.query(text, values);
  };

  private check(): void {
    if (!this.open) throw new Error("postgres store: transaction already ended");
  }

  private write(text: string, values: unknown[]): Promise<void> {
    this.check();
    this.pipeline.send(text, values);
    return Promise.resolve();
  }

  private async one(text: string, values: unknown[]): Promise<Uint8Array | undefined> {
    const [row] = await this.run(text, values);
    return row?.data as Uint8Array | undefined;
  }

  private t(table: string): string {
    return `${this.schema}.${table}`;
  }

  versionSeq(update: ResourcesUpdate): number {
    return this.versionSeqs.get(versionKey(update.resourcesId, update.version)) ?? 0;
  }

  async insertRollouts(rollouts: Rollout[]): Promise<void> {
    if (rollouts.length === 0) return;
    const rows = rollouts.map(rolloutRow);
    await this.write(
      `INSERT INTO ${this.t("rollouts")} (rollout_id, status, start_time, end_time, mode, resources_id, resources_version, ` +
        "group_id, data) SELECT * FROM unnest($1::text[], $2::integer[], $3::float8[], $4::float8[], $5::integer[], " +
        "$6::text[], $7::bigint[], $8::text[], $9::bytea[])",
      [
        rows.map((r) => r.rolloutId),
        rows.map((r) => r.status),
        rows.map((r) => r.startTime),
        rows.map((r) => r.endTime),
        rows.map((r) => r.mode),
        rows.map((r) => r.resourcesId),
        rows.map((r) => r.resourcesVersion),
        rows.map((r) => r.groupId),
        rows.map((r) => r.data),
      ],
    );
  }

  /**
   * Reads (and with row locking, locks) a rollout, and in the same round trip its latest attempt, which the callers
   * of getRollout nearly always read next. The attempt is read by a second statement, after the first: with row
   * locking it sees what the rollout's previous lock holder committed.
   */
  async getRollout(rolloutId: string): Promise<Rollout | undefined> {
    const [rollouts, attempts] = await Promise.all([
      this.run(`SELECT data FROM ${this.t("rollouts")} WHERE rollout_id = $1${this.forUpdate}`, [rolloutId]),
      this.run(this.latestAttemptSql(), [rolloutId]),
    ]);
    const data = rollouts[0]?.data as Uint8Array | undefined;
    if (!data) return undefined;
    const attempt = attempts[0];
    this.latestKnown.set(
      rolloutId,
      attempt
        ? {
            attemptId: attempt.attempt_id as string,
            sequenceId: attempt.sequence_id as number,
            data: attempt.data as Uint8Array,
          }
        : null,
    );
    return decodeRollout(data);
  }

  private latestAttemptSql(): string {
    return (
      `SELECT attempt_id, sequence_id, data FROM ${this.t("attempts")} WHERE rollout_id = $1 ` +
      "ORDER BY sequence_id DESC, seq DESC LIMIT 1"
    );
  }

  async putRollout(rollout: Rollout): Promise<void> {
    const r = rolloutRow(rollout);
    await this.write(
      `INSERT INTO ${this.t("rollouts")} (rollout_id, status, start_time, end_time, mode, resources_id, resources_version, ` +
        "group_id, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (rollout_id) DO UPDATE SET " +
        "status = excluded.status, start_time = excluded.start_time, end_time = excluded.end_time, mode = excluded.mode, " +
        "resources_id = excluded.resources_id, resources_version = excluded.resources_version, " +
        "group_id = excluded.group_id, data = excluded.data",
      [r.rolloutId, r.status, r.startTime, r.endTime, r.mode, r.resourcesId, r.resourcesVersion, r.groupId, r.data],
    );
  }

  queryRollouts(filter: RolloutFilter, page: PageSpec): Promise<PageResult<Rollout>> {
    return queryPage(this.run, this.schema, "rollouts", rolloutWhere(filter), page, decodeRollout);
  }

  /**
   * The watchdog's candidates. Only one server scans at a time: the scan takes a transaction-level advisory lock,
   * and a server that does not get it finds no candidates (the scan in progress elsewhere covers them). With row
   * locking, rollouts locked by a transaction in flight are skipped until the next pass.
   */
  async activeRollouts(): Promise<Rollout[]> {
    const [lock] = await this.run("SELECT pg_try_advisory_xact_lock(hashtext($1)::bigint) AS locked", [this.watchdogLockKey]);
    if (lock?.locked !== true) return [];
    const lockRows = this.forUpdate ? " FOR UPDATE SKIP LOCKED" : "";
    const rows = await this.run(`SELECT data FROM ${this.t("rollouts")} WHERE status = ANY($1::integer[]) ORDER BY seq${lockRows}`, [
      [RolloutStatus.PREPARING, RolloutStatus.RUNNING],
    ]);
    return rows.map((row) => decodeRollout(row.data as Uint8Array));
  }

  async insertAttempt(attempt: Attempt): Promise<void> {
    const a = attemptRow(attempt);
    this.knowAttempt(attempt, a[8] as Uint8Array, true);
    await this.write(
      `INSERT INTO ${this.t("attempts")} (rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, ` +
        "last_heartbeat_time, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
      a,
    );
  }

  /** Keeps the known latest attempt current: a new attempt numbered above it replaces it, as does its own update. */
  private knowAttempt(attempt: Attempt, data: Uint8Array, inserted: boolean): void {
    const known = this.latestKnown.get(attempt.rolloutId);
    if (known === undefined) return;
    const replaces = inserted ? !known || attempt.sequenceId >= known.sequenceId : known?.attemptId === attempt.attemptId;
    if (replaces) {
      this.latestKnown.set(attempt.rolloutId, { attemptId: attempt.attemptId, sequenceId: attempt.sequenceId, data });
    }
  }

  async getAttempt(rolloutId: string, attemptId: string): Promise<Attempt | undefined> {
    const known = this.latestKnown.get(rolloutId);
    if (known?.attemptId === attemptId) return decodeAttempt(known.data);
    const data = await this.one(`SELECT data FROM ${this.t("attempts")} WHERE rollout_id = $1 AND attempt_id = $2`, [rolloutId, attemptId]);
    return data && decodeAttempt(data);
  }

  async latestAttempts(rolloutIds: string[]): Promise<Map<string, Attempt>> {
    const result = new Map<string, Attempt>();
    const ids: string[] = [];
    for (const id of new Set(rolloutIds)) {
      const known = this.latestKnown.get(id);
      if (known === undefined) ids.push(id);
      else if (known) result.set(id, decodeAttempt(known.data));
    }
    if (ids.length === 1) {
      const data = await this.one(this.latestAttemptSql(), [ids[0]]);
      if (data) result.set(ids[0]!, decodeAttempt(data));
      return result;
    }
    if (ids.length === 0) return result;
    const rows = await this.run(
      `SELECT a.data FROM unnest($1::text[]) AS r(id) CROSS JOIN LATERAL (SELECT data FROM ${this.t("attempts")} ` +
        "WHERE rollout_id = r.id ORDER BY sequence_id DESC, seq DESC LIMIT 1) AS a",
      [ids],
    );
    for (const row of rows) {
      const attempt = decodeAttempt(row.data as Uint8Array);
      result.set(attempt.rolloutId, attempt);
    }
    return result;
  }

  async putAttempt(attempt: Attempt): Promise<void> {
    const a = attemptRow(attempt);
    this.knowAttempt(attempt, a[8] as Uint8Array, false);
    await this.write(
      `INSERT INTO ${this.t("attempts")} (rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, ` +
        "last_heartbeat_time, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) " +
        "ON CONFLICT (rollout_id, attempt_id) DO UPDATE SET sequence_id = excluded.sequence_id, " +
        "start_time = excluded.start_time, end_time = excluded.end_time, status = excluded.status, " +
        "worker_id = excluded.worker_id, last_heartbeat_time = excluded.last_heartbeat_time, data = excluded.data",
      a,
    );
  }

  queryAttempts(rolloutId: string, page: PageSpec): Promise<PageResult<Attempt>> {
    return queryPage(this.run, this.schema, "attempts", attemptWhere(rolloutId), page, decodeAttempt);
  }

  async enqueue(rolloutIds: string[]): Promise<void> {
    if (rolloutIds.length === 0) return;
    await this.write(
      `INSERT INTO ${this.t("queue")} (rollout_id) SELECT id FROM unnest($1::text[]) WITH ORDINALITY AS u(id, n) ` +
        "ORDER BY n ON CONFLICT (rollout_id) DO NOTHING",
      [rolloutIds],
    );
  }

  /** Takes the head of the queue; rows another transaction is taking are skipped, so no id goes out twice. */
  async dequeue(limit: number): Promise<string[]> {
    if (!(limit > 0)) return [];
    const rows = await this.run(
      `WITH head AS (SELECT seq FROM ${this.t("queue")} ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED) ` +
        `DELETE FROM ${this.t("queue")} AS q USING head WHERE q.seq = head.seq RETURNING q.seq, q.rollout_id`,
      [limit],
    );
    return rows.sort((a, b) => (a.seq as number) - (b.seq as number)).map((row) => row.rollout_id as string);
  }

  async insertSpans(spans: Span[]): Promise<Array<{ sequenceId: number; duplicate: boolean }>> {
    if (spans.length === 0) return [];
    const facts = spans.map(factsOf);
    const rows = await this.run(
      `INSERT INTO ${this.t("spans")} (rollout_id, attempt_id, span_id, sequence_id, trace_id, parent_id, name, ` +
        "start_time, end_time, reward, llm_prompt_tokens, llm_response_tokens, llm_call_key, data) SELECT * FROM " +
        "unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::float8[], " +
        "$9::float8[], $10::float8[], $11::bigint[], $12::bigint[], $13::text[], $14::bytea[]) " +
        "ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING RETURNING rollout_id, attempt_id, span_id",
      [
        spans.map((s) => s.rolloutId),
        spans.map((s) => s.attemptId),
        spans.map((s) => s.spanId),
        spans.map((s) => s.sequenceId),
        spans.map((s) => s.traceId),
        spans.map((s) => s.parentId),
        spans.map((s) => s.name),
        spans.map((s) => time(s.startTime)),
        spans.map((s) => time(s.endTime)),
        facts.map((f) => f.reward),
        facts.map((f) => f.promptTokens),
        facts.map((f) => f.responseTokens),
        facts.map((f) => f.llmCallKey),
        spans.map(encodeSpan),
      ],
    );
    // Each key inserted here was inserted by its first copy in the batch; every other copy is a duplicate.
    const inserted = new Set(rows.map((row) => spanKey(row.rollout_id as string, row.attempt_id as string, row.span_id as string)));
    const keys = spans.map((s) => spanKey(s.rolloutId, s.attemptId, s.spanId));
    const isNew = keys.map((key) => inserted.delete(key));
    const duplicates = spans.filter((_, i) => !isNew[i]);
    const stored =
      duplicates.length > 0
        ? await this.existingSpans(duplicates.map((s) => [s.rolloutId, s.attemptId, s.spanId]))
        : new Map<string, number>();
    return spans.map((span, i) =>
      isNew[i]
        ? { sequenceId: span.sequenceId, duplicate: false }
        : { sequenceId: stored.get(keys[i]!) ?? span.sequenceId, duplicate: true },
    );
  }

  async existingSpans(keys: Array<[string, string, string]>): Promise<Map<string, number>> {
    const result = new Map<string, number>();
    if (keys.length === 0) return result;
    const rows = await this.run(
      `SELECT s.rollout_id, s.attempt_id, s.span_id, s.sequence_id FROM ${this.t("spans")} AS s ` +
        "JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(rollout_id, attempt_id, span_id) " +
        "ON s.rollout_id = k.rollout_id AND s.attempt_id = k.attempt_id AND s.span_id = k.span_id",
      [keys.map((k) => k[0]), keys.map((k) => k[1]), keys.map((k) => k[2])],
    );
    for (const row of rows) {
      result.set(spanKey(row.rollout_id as string, row.attempt_id as string, row.span_id as string), row.sequence_id as number);
    }
    return result;
  }

  querySpans(filter: SpanFilter, page: PageSpec): Promise<PageResult<Span>> {
    return queryPage(this.run, this.schema, "spans", spanWhere(filter), page, decodeSpan);
  }

  /** The counter row stays locked until the transaction ends: ids are unique, and monotonic in commit order. */
  async nextSequenceId(rolloutId: string, count: number): Promise<number> {
    const [row] = await this.run(
      `INSERT INTO ${this.t("span_counters")} AS c (rollout_id, value) VALUES ($1, $2) ` +
        "ON CONFLICT (rollout_id) DO UPDATE SET value = c.value + excluded.value RETURNING value",
      [rolloutId, count],
    );
    return row?.value as number;
  }

  async raiseSequenceId(rolloutId: string, value: number): Promise<void> {
    await this.write(
      `INSERT INTO ${this.t("span_counters")} AS c (rollout_id, value) VALUES ($1, $2) ` +
        "ON CONFLICT (rollout_id) DO UPDATE SET value = excluded.value WHERE c.value < excluded.value",
      [rolloutId, value],
    );
  }

  async insertResources(update: ResourcesUpdate): Promise<void> {
    const r = resourcesRow(update);
    await this.write(
      `INSERT INTO ${this.t("resources")} (resources_id, create_time, update_time, version, data) VALUES ($1, $2, $3, $4, $5)`,
      r,
    );
    await this.published(update, r[4]);
  }

  async putResources(update: ResourcesUpdate): Promise<void> {
    const r = resourcesRow(update);
    await this.write(
      `INSERT INTO ${this.t("resources")} (resources_id, create_time, update_time, version, data) ` +
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (resources_id) DO UPDATE SET create_time = excluded.create_time, " +
        "update_time = excluded.update_time, version = excluded.version, data = excluded.data",
      r,
    );
    await this.published(update, r[4]);
  }

  /** Records the version for watchers on every server and makes it the latest snapshot. */
  private async published(update: ResourcesUpdate, data: Uint8Array): Promise<void> {
    const [row] = await this.run(
      `INSERT INTO ${this.t("resource_versions")} (resources_id, version, data) VALUES ($1, $2, $3) ` +
        "ON CONFLICT (resources_id, version) DO UPDATE SET data = excluded.data RETURNING seq",
      [update.resourcesId, update.version, data],
    );
    // bigserial comes back as a string (pg's int8): the notification payload carries a number.
    const seq = Number(row?.seq);
    this.versionSeqs.set(versionKey(update.resourcesId, update.version), seq);
    await this.write(
      `INSERT INTO ${this.t("latest_resources")} (id, resources_id) VALUES (1, $1) ` +
        "ON CONFLICT (id) DO UPDATE SET resources_id = excluded.resources_id",
      [update.resourcesId],
    );
  }

  async getResourcesVersion(resourcesId: string, version: number): Promise<ResourcesUpdate | undefined> {
    const data = await this.one(`SELECT data FROM ${this.t("resource_versions")} WHERE resources_id = $1 AND version = $2`, [
      resourcesId,
      version,
    ]);
    return data && decodeResources(data);
  }

  queryResourceVersions(resourcesId: string, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    return queryPage(this.run, this.schema, "resource_versions", resourceVersionsWhere(resourcesId), page, decodeResources);
  }

  async getResources(resourcesId: string): Promise<ResourcesUpdate | undefined> {
    const data = await this.one(`SELECT data FROM ${this.t("resources")} WHERE resources_id = $1${this.forUpdate}`, [resourcesId]);
    return data && decodeResources(data);
  }

  async latestResources(): Promise<ResourcesUpdate | undefined> {
    const data = await this.one(
      `SELECT r.data FROM ${this.t("latest_resources")} AS l JOIN ${this.t("resources")} AS r ON r.resources_id = l.resources_id`,
      [],
    );
    return data && decodeResources(data);
  }

  queryResources(filter: ResourcesFilter, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    return queryPage(this.run, this.schema, "resources", resourcesWhere(filter), page, decodeResources);
  }

  async getWorker(workerId: string): Promise<Worker | undefined> {
    const data = await this.one(`SELECT data FROM ${this.t("workers")} WHERE worker_id = $1${this.forUpdate}`, [workerId]);
    return data && decodeWorker(data);
  }

  async putWorker(worker: Worker): Promise<void> {
    await this.write(
      `INSERT INTO ${this.t("workers")} (worker_id, status, last_heartbeat_time, last_dequeue_time, last_busy_time, ` +
        "last_idle_time, data) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (worker_id) DO UPDATE SET " +
        "status = excluded.status, last_heartbeat_time = excluded.last_heartbeat_time, " +
        "last_dequeue_time = excluded.last_dequeue_time, last_busy_time = excluded.last_busy_time, " +
        "last_idle_time = excluded.last_idle_time, data = excluded.data",
      [
        worker.workerId,
        worker.status,
        time(worker.lastHeartbeatTime),
        time(worker.lastDequeueTime),
        time(worker.lastBusyTime),
        time(worker.lastIdleTime),
        encodeMessage(WorkerSchema, worker),
      ],
    );
  }

  queryWorkers(filter: WorkerFilter, page: PageSpec): Promise<PageResult<Worker>> {
    return queryPage(this.run, this.schema, "workers", workerWhere(filter), page, decodeWorker);
  }

  async counts(): Promise<StorageCounts> {
    const count = (table: string) => `(SELECT count(*)::bigint FROM ${this.t(table)})`;
    const [row] = await this.run(
      `SELECT ${count("rollouts")} AS rollouts, ${count("attempts")} AS attempts, ${count("spans")} AS spans, ` +
        `${count("resources")} AS resources, ${count("workers")} AS workers, ${count("queue")} AS queue`,
    );
    const rolloutsByStatus = new Map<RolloutStatus, number>();
    for (const r of await this.run(`SELECT status, count(*)::bigint AS n FROM ${this.t("rollouts")} GROUP BY status`)) {
      rolloutsByStatus.set(r.status as RolloutStatus, r.n as number);
    }
    return {
      rollouts: row?.rollouts as number,
      attempts: row?.attempts as number,
      spans: row?.spans as number,
      resources: row?.resources as number,
      workers: row?.workers as number,
      queueLength: row?.queue as number,
      rolloutsByStatus,
    };
  }

  async firstRolloutStartTime(): Promise<number | undefined> {
    const [row] = await this.run(`SELECT min(start_time) AS first FROM ${this.t("rollouts")}`, []);
    return (row?.first as number | null) ?? undefined;
  }

  async rolloutTimeline(query: TimelineQuery): Promise<Timeline> {
    const aggregates = aggregatesOf(this.schema);
    const counts = async (column: "start_time" | "end_time") => {
      const { text, values } = aggregates.timeline(query, column);
      return (await this.run(text, values)).map(bucketCount);
    };
    return { created: await counts("start_time"), finished: await counts("end_time") };
  }

  async rewardGroups(scope: RolloutScope): Promise<RewardGroup[]> {
    const aggregates = aggregatesOf(this.schema);
    const rewards = aggregates.rewards(scope);
    const tokens = aggregates.tokens(scope);
    return rewardGroups(await this.run(rewards.text, rewards.values), await this.run(tokens.text, tokens.values));
  }

  async finalRewards(rolloutIds: string[]): Promise<Map<string, number>> {
    const { text, values } = aggregatesOf(this.schema).finalRewards(rolloutIds);
    return finalRewards(await this.run(text, values));
  }

  notify(event: StoreEvent): void {
    this.check();
    this.events.push(event);
  }
}
