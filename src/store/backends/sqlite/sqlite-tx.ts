import type { Attempt, ResourcesUpdate, Rollout, RolloutStatus, Span, Worker } from "../../../gen/agl/v1/types_pb.js";
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
  attemptKey,
  spanKey,
} from "../../backend.js";
import { plainSpan } from "../../received-span.js";
import { encodeSpan, factsOf, spanToKeep } from "../../span-wire.js";
import { fieldValue, sortAndPage } from "../memory/memory-query.js";
import { bucketCount, finalRewards, rewardGroups, type SqlRow } from "../sql/aggregate-rows.js";
import { decodeAttempt, decodeResources, decodeRollout, decodeSpan, rolloutRow, time } from "../sql/stored-messages.js";
import {
  aggregates,
  attemptWhere,
  queryPage,
  resourcesWhere,
  resourceVersionsWhere,
  rolloutWhere,
  spanWhere,
  type StatementCache,
  workerWhere,
} from "./sqlite-queries.js";
import type { RowCache } from "./sqlite-row-cache.js";
import { attemptRow, resourcesRow, type RowUpdates, type Statements } from "./sqlite-statements.js";
import { decodeWorker, encodeWorker, type PendingWorkerRows } from "./sqlite-worker-rows.js";

/** A span's key within its rollout, as the row cache keeps the rollout's spans. */
const spanInRollout = (attemptId: string, spanId: string) => `${attemptId}\0${spanId}`;

/**
 * One call's transaction of the SQLite backend: its statements run synchronously on the backend's connection, inside
 * the transaction the backend's open group shares (see sqlite-backend.ts).
 */
export class SqliteTx implements StorageTx {
  /** Cleared when the transaction ends: a leaked tx must not write outside its transaction. */
  open = true;
  /** The call ran a statement that writes: undoing it takes a rollback. */
  wrote = false;
  readonly events: StoreEvent[] = [];
  /**
   * Keys of the cached rows this call wrote (rollouts: also those whose attempts it wrote), forgotten if it is undone.
   * Made on the first write: calls that only read (queries, reads of one row) never need it.
   */
  private written: { rollouts: Set<string>; attempts: Set<string>; workers: Set<string> } | undefined;
  /** Span counters this call took, by rollout, until a span it stores covers them or the call ends ({@link finish}). */
  private readonly counters = new Map<string, number>();

  private get writes() {
    this.written ??= { rollouts: new Set(), attempts: new Set(), workers: new Set() };
    return this.written;
  }

  constructor(
    private readonly s: Statements,
    private readonly updates: RowUpdates,
    private readonly cache: StatementCache,
    private readonly rows: RowCache,
    private readonly pendingWorkers: PendingWorkerRows,
  ) {}

  /** The call was undone: what it wrote is no longer in the database, so it leaves the row cache too. */
  forgetWrites(): void {
    if (!this.written) return;
    for (const id of this.written.rollouts) {
      this.rows.rollouts.delete(id);
      this.rows.forgetLatestOf(id);
      this.rows.forgetSpansOf(id);
    }
    for (const key of this.written.attempts) this.rows.attempts.delete(key);
    for (const id of this.written.workers) this.rows.workers.delete(id);
  }

  private rolloutWritten(rolloutId: string, data: Uint8Array, columns: readonly unknown[]): void {
    this.rows.rollouts.set(rolloutId, data, columns);
    this.writes.rollouts.add(rolloutId);
  }

  private attemptWritten(attempt: Attempt, data: Uint8Array, columns: readonly unknown[]): void {
    const key = attemptKey(attempt.rolloutId, attempt.attemptId);
    this.rows.attempts.set(key, data, columns);
    this.rows.attemptWritten(attempt);
    this.writes.attempts.add(key);
    this.writes.rollouts.add(attempt.rolloutId);
  }

  private check(): void {
    if (!this.open) throw new Error("sqlite store: transaction already ended");
  }

  /** `check`, before a statement that writes. */
  private checkWrite(): void {
    this.check();
    this.wrote = true;
  }

  async insertRollouts(rollouts: Rollout[]): Promise<void> {
    this.checkWrite();
    for (const rollout of rollouts) {
      const row = rolloutRow(rollout);
      this.s.insertRollout.run(row);
      this.rolloutWritten(rollout.rolloutId, row.data, this.updates.rollouts.valuesOf(row));
      this.rows.rolloutCreated(rollout.rolloutId);
    }
  }

  async getRollout(rolloutId: string): Promise<Rollout | undefined> {
    this.check();
    const data = this.rows.rollouts.read(rolloutId, () => this.s.getRollout.get(rolloutId) as Uint8Array | undefined);
    return data && decodeRollout(data);
  }

  async putRollout(rollout: Rollout): Promise<void> {
    this.checkWrite();
    const row = rolloutRow(rollout);
    const columns = this.updates.rollouts.write(row, this.rows.rollouts.columnsOf(rollout.rolloutId));
    this.rolloutWritten(rollout.rolloutId, row.data, columns);
  }

  async queryRollouts(filter: RolloutFilter, page: PageSpec): Promise<PageResult<Rollout>> {
    this.check();
    return queryPage(this.cache, "rollouts", rolloutWhere(filter), page, decodeRollout);
  }

  async activeRollouts(): Promise<Rollout[]> {
    this.check();
    return (this.s.activeRollouts.all() as Uint8Array[]).map(decodeRollout);
  }

  async insertAttempt(attempt: Attempt): Promise<void> {
    this.checkWrite();
    const row = attemptRow(attempt);
    this.s.insertAttempt.run(row);
    this.attemptWritten(attempt, row.data, this.updates.attempts.valuesOf(row));
  }

  async getAttempt(rolloutId: string, attemptId: string): Promise<Attempt | undefined> {
    this.check();
    const key = attemptKey(rolloutId, attemptId);
    const data = this.rows.attempts.read(key, () => this.s.getAttempt.get(rolloutId, attemptId) as Uint8Array | undefined);
    return data && decodeAttempt(data);
  }

  async latestAttempts(rolloutIds: string[]): Promise<Map<string, Attempt>> {
    this.check();
    const result = new Map<string, Attempt>();
    for (const rolloutId of rolloutIds) {
      if (result.has(rolloutId)) continue;
      const cached = this.cachedLatestAttempt(rolloutId);
      const attempt = cached === undefined ? this.readLatestAttempt(rolloutId) : cached;
      if (attempt) result.set(rolloutId, attempt);
    }
    return result;
  }

  /** The latest attempt from the row cache: null when the rollout has none, undefined when the cache cannot say. */
  private cachedLatestAttempt(rolloutId: string): Attempt | null | undefined {
    const latest = this.rows.latestOf(rolloutId);
    if (latest === null) return null;
    const data = latest && this.rows.attempts.get(attemptKey(rolloutId, latest.attemptId));
    return data ? decodeAttempt(data) : undefined;
  }

  private readLatestAttempt(rolloutId: string): Attempt | undefined {
    const data = this.s.latestAttempt.get(rolloutId) as Uint8Array | undefined;
    if (!data) return undefined;
    const attempt = decodeAttempt(data);
    this.rows.attempts.set(attemptKey(rolloutId, attempt.attemptId), data);
    this.rows.latestRead(attempt);
    return attempt;
  }

  async putAttempt(attempt: Attempt): Promise<void> {
    this.checkWrite();
    const row = attemptRow(attempt);
    const columns = this.updates.attempts.write(row, this.rows.attempts.columnsOf(attemptKey(attempt.rolloutId, attempt.attemptId)));
    this.attemptWritten(attempt, row.data, columns);
  }

  async queryAttempts(rolloutId: string, page: PageSpec): Promise<PageResult<Attempt>> {
    this.check();
    return queryPage(this.cache, "attempts", attemptWhere(rolloutId), page, decodeAttempt);
  }

  async enqueue(rolloutIds: string[]): Promise<void> {
    this.checkWrite();
    for (const rolloutId of rolloutIds) this.s.enqueue.run(rolloutId);
  }

  async dequeue(limit: number): Promise<string[]> {
    this.checkWrite();
    if (!(limit > 0)) return [];
    const rows = this.s.queueHead.all(limit) as Array<[number, string]>;
    if (rows.length === 0) return [];
    // The rows are the queue's head, so everything up to the last one's seq is exactly them.
    this.s.dequeueThrough.run(rows[rows.length - 1]![0]);
    return rows.map((row) => row[1]);
  }

  async insertSpans(spans: Span[]): Promise<Array<{ sequenceId: number; duplicate: boolean }>> {
    this.checkWrite();
    const result: Array<{ sequenceId: number; duplicate: boolean }> = [];
    for (const span of spans) {
      const known = this.spansWritten(span.rolloutId);
      const facts = factsOf(span);
      const data = encodeSpan(span);
      const inserted = this.s.insertSpan.run(
        span.rolloutId,
        span.attemptId,
        span.spanId,
        span.sequenceId,
        span.traceId,
        span.parentId,
        span.name,
        time(span.startTime),
        time(span.endTime),
        facts.reward,
        facts.promptTokens,
        facts.responseTokens,
        facts.llmCallKey,
        data,
      );
      if (inserted.changes > 0) {
        if (this.counters.get(span.rolloutId) === span.sequenceId) this.counters.delete(span.rolloutId);
        if (known) {
          const keep = this.rows.keepingSpansOf(known) ? spanToKeep(span) : undefined;
          this.rows.spanStored(known, span.rolloutId, spanInRollout(span.attemptId, span.spanId), span.sequenceId, keep, data.byteLength);
        }
        result.push({ sequenceId: span.sequenceId, duplicate: false });
      } else {
        // Stored already (by an earlier batch or earlier in this one): report the stored span's id, leave it alone.
        const stored = this.s.spanSequenceId.get(span.rolloutId, span.attemptId, span.spanId) as number;
        if (known && known.stored.get(spanInRollout(span.attemptId, span.spanId)) !== stored) this.rows.forgetSpansOf(span.rolloutId);
        result.push({ sequenceId: stored, duplicate: true });
      }
    }
    return result;
  }

  async existingSpans(keys: Array<[string, string, string]>): Promise<Map<string, number>> {
    this.check();
    const result = new Map<string, number>();
    for (const [rolloutId, attemptId, spanId] of keys) {
      const known = this.rows.spansOf(rolloutId);
      const stored = known
        ? known.stored.get(spanInRollout(attemptId, spanId))
        : (this.s.spanSequenceId.get(rolloutId, attemptId, spanId) as number | undefined);
      if (stored !== undefined) result.set(spanKey(rolloutId, attemptId, spanId), stored);
    }
    return result;
  }

  async querySpans(filter: SpanFilter, page: PageSpec): Promise<PageResult<Span>> {
    this.check();
    return this.keptSpans(filter, page) ?? queryPage(this.cache, "spans", spanWhere(filter), page, decodeSpan);
  }

  /**
   * The page from the spans the row cache keeps, when it keeps all of the rollout's and the query filters on nothing
   * but the attempt and the position (the triplet stream's query); in SQL's order: by sequence id, ties in the order
   * they were stored (`seq`).
   */
  private keptSpans(filter: SpanFilter, page: PageSpec): PageResult<Span> | undefined {
    if (filter.traceId || filter.spanId || filter.parentId || filter.name) return undefined;
    if (page.sortBy !== undefined && page.sortBy !== "sequence_id") return undefined;
    const kept = this.rows.keptSpansOf(filter.rolloutId);
    if (!kept) return undefined;
    const { attemptId, afterSequenceId } = filter;
    const matches = kept.filter(
      (s) => (attemptId === undefined || s.attemptId === attemptId) && (afterSequenceId === undefined || s.sequenceId > afterSequenceId),
    );
    // Frozen, not deeply (freezing a span's hundred-odd nested objects costs more than reading it from the file): a
    // span kept as it was decoded is the same object for every reader.
    return sortAndPage(matches, page, fieldValue, "sequence_id", (span) => Object.freeze(plainSpan(span)));
  }

  async nextSequenceId(rolloutId: string, count: number): Promise<number> {
    this.check();
    const last = this.lastSequenceId(rolloutId) + count;
    this.counterTaken(rolloutId, last);
    return last;
  }

  async raiseSequenceId(rolloutId: string, value: number): Promise<void> {
    this.check();
    if (value > this.lastSequenceId(rolloutId)) this.counterTaken(rolloutId, value);
  }

  /**
   * The last sequence id the rollout issued: the larger of its stored counter and its spans' largest id, since a
   * counter covered by a stored span is not written (see {@link finish}).
   */
  private lastSequenceId(rolloutId: string): number {
    return (
      this.counters.get(rolloutId) ?? this.rows.spansOf(rolloutId)?.counter ?? (this.s.lastSequenceId.get(rolloutId, rolloutId) as number)
    );
  }

  private counterTaken(rolloutId: string, value: number): void {
    const known = this.spansWritten(rolloutId);
    if (known) known.counter = value;
    this.counters.set(rolloutId, value);
  }

  /**
   * Ends the call: writes the counters it took that no span it stored covers. A span batch takes ids and stores spans
   * under them, the last one under the counter's new value, so it writes no counter: one statement and one page less
   * a batch.
   */
  finish(): void {
    if (this.counters.size > 0) this.wrote = true;
    for (const [rolloutId, value] of this.counters) this.s.raiseSequenceId.run(rolloutId, value);
    this.counters.clear();
  }

  /** The cache's knowledge of a rollout's spans, which this call is about to change (forgotten if it is undone). */
  private spansWritten(rolloutId: string) {
    const known = this.rows.spansOf(rolloutId);
    if (known) this.writes.rollouts.add(rolloutId);
    return known;
  }

  async insertResources(update: ResourcesUpdate): Promise<void> {
    this.checkWrite();
    const row = resourcesRow(update);
    this.s.insertResources.run(row);
    this.published(update, row.data);
  }

  async putResources(update: ResourcesUpdate): Promise<void> {
    this.checkWrite();
    const row = resourcesRow(update);
    this.s.putResources.run(row);
    this.published(update, row.data);
  }

  /** Keeps the version in the history and makes it the latest snapshot. */
  private published(update: ResourcesUpdate, data: Uint8Array): void {
    this.s.putResourceVersion.run(update.resourcesId, update.version, data);
    this.s.setLatestResources.run(update.resourcesId);
  }

  async getResourcesVersion(resourcesId: string, version: number): Promise<ResourcesUpdate | undefined> {
    this.check();
    const data = this.s.getResourceVersion.get(resourcesId, version) as Uint8Array | undefined;
    return data && decodeResources(data);
  }

  async queryResourceVersions(resourcesId: string, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    this.check();
    return queryPage(this.cache, "resource_versions", resourceVersionsWhere(resourcesId), page, decodeResources);
  }

  async getResources(resourcesId: string): Promise<ResourcesUpdate | undefined> {
    this.check();
    const data = this.s.getResources.get(resourcesId) as Uint8Array | undefined;
    return data && decodeResources(data);
  }

  async latestResources(): Promise<ResourcesUpdate | undefined> {
    this.check();
    const data = this.s.latestResources.get() as Uint8Array | undefined;
    return data && decodeResources(data);
  }

  async queryResources(filter: ResourcesFilter, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    this.check();
    return queryPage(this.cache, "resources", resourcesWhere(filter), page, decodeResources);
  }

  async getWorker(workerId: string): Promise<Worker | undefined> {
    this.check();
    const data =
      this.pendingWorkers.dataOf(workerId) ??
      this.rows.workers.read(workerId, () => this.s.getWorker.get(workerId) as Uint8Array | undefined);
    return data && decodeWorker(data);
  }

  /** Written with the group (see {@link PendingWorkerRows}). */
  async putWorker(worker: Worker): Promise<void> {
    this.checkWrite();
    const data = encodeWorker(worker);
    this.pendingWorkers.set(worker, data);
    this.rows.workers.set(worker.workerId, data);
    this.writes.workers.add(worker.workerId);
  }

  async queryWorkers(filter: WorkerFilter, page: PageSpec): Promise<PageResult<Worker>> {
    this.check();
    this.pendingWorkers.write(this.s.putWorker);
    return queryPage(this.cache, "workers", workerWhere(filter), page, decodeWorker);
  }

  async counts(): Promise<StorageCounts> {
    this.check();
    this.pendingWorkers.write(this.s.putWorker);
    const [rollouts, attempts, spans, resources, workers, queueLength] = this.s.counts.get() as number[];
    const rolloutsByStatus = new Map<RolloutStatus, number>();
    for (const [status, count] of this.s.rolloutsByStatus.all() as Array<[RolloutStatus, number]>) {
      rolloutsByStatus.set(status, count);
    }
    return {
      rollouts: rollouts!,
      attempts: attempts!,
      spans: spans!,
      resources: resources!,
      workers: workers!,
      queueLength: queueLength!,
      rolloutsByStatus,
    };
  }

  async firstRolloutStartTime(): Promise<number | undefined> {
    this.check();
    return (this.s.firstRolloutStart.get() as number | null) ?? undefined;
  }

  async rolloutTimeline(query: TimelineQuery): Promise<Timeline> {
    this.check();
    const counts = (column: "start_time" | "end_time") => {
      const { text, values } = aggregates.timeline(query, column);
      return (this.cache.rows(text).all(...values) as Array<Record<string, number>>).map(bucketCount);
    };
    return { created: counts("start_time"), finished: counts("end_time") };
  }

  async rewardGroups(scope: RolloutScope): Promise<RewardGroup[]> {
    this.check();
    const rewards = aggregates.rewards(scope);
    const tokens = aggregates.tokens(scope);
    return rewardGroups(
      this.cache.rows(rewards.text).all(...rewards.values) as SqlRow[],
      this.cache.rows(tokens.text).all(...tokens.values) as SqlRow[],
    );
  }

  async finalRewards(rolloutIds: string[]): Promise<Map<string, number>> {
    this.check();
    const { text, values } = aggregates.finalRewards(rolloutIds);
    return finalRewards(this.cache.rows(text).all(...values) as SqlRow[]);
  }

  notify(event: StoreEvent): void {
    this.check();
    this.events.push(event);
  }
}
