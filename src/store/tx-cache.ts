import type { Attempt, ResourcesUpdate, Rollout, Span, Worker } from "../gen/agl/v1/types_pb.js";
import {
  attemptKey,
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
} from "./backend.js";
import { deepCopy } from "./deep-copy.js";

/** A transaction that remembers rows it read or wrote; `flush()` writes every changed row once. */
export interface CachedTx extends StorageTx {
  flush(): Promise<void>;
}

/** Told of each attempt a transaction writes, with its rollout when the transaction holds it (the watchdog's deadlines). */
export type AttemptObserver = (attempt: Attempt, rollout: Rollout | undefined) => void;

/**
 * Wraps a transaction with an identity map of rollouts, attempts and workers. A store call reads and rewrites the
 * same few rows several times (a span batch's heartbeat, then the attempt update, then the worker); with the map each
 * row is read once and written once per transaction, whatever the backend. Any other operation first flushes pending
 * writes, so queries always see them.
 */
export function withTxCache(tx: StorageTx, onAttempt?: AttemptObserver): CachedTx {
  return new TxCache(tx, onAttempt);
}

/**
 * A class, not an object of closures: a store call makes one or more, and building thirty-odd closures for each came to
 * 2 % of what the demo's store allocated. Reads that pass through flush first only when a write is pending, so a clean
 * transaction's query costs no extra promise.
 */
class TxCache implements CachedTx {
  private readonly rollouts = new Map<string, Rollout | undefined>();
  private readonly attempts = new Map<string, Attempt>();
  private readonly latest = new Map<string, Attempt | undefined>();
  private readonly workers = new Map<string, Worker | undefined>();
  // Keyed by id: when a row is put again (possibly as another object), the last put wins.
  private readonly dirtyRollouts = new Map<string, Rollout>();
  private readonly dirtyAttempts = new Map<string, Attempt>();
  private readonly dirtyWorkers = new Map<string, Worker>();

  constructor(
    private readonly tx: StorageTx,
    private readonly onAttempt: AttemptObserver | undefined,
  ) {}

  private get dirty(): boolean {
    return this.dirtyRollouts.size > 0 || this.dirtyAttempts.size > 0 || this.dirtyWorkers.size > 0;
  }

  async flush(): Promise<void> {
    for (const rollout of this.dirtyRollouts.values()) await this.tx.putRollout(rollout);
    for (const attempt of this.dirtyAttempts.values()) await this.tx.putAttempt(attempt);
    for (const worker of this.dirtyWorkers.values()) await this.tx.putWorker(worker);
    this.dirtyRollouts.clear();
    this.dirtyAttempts.clear();
    this.dirtyWorkers.clear();
  }

  private rememberAttempt(attempt: Attempt): void {
    this.attempts.set(attemptKey(attempt.rolloutId, attempt.attemptId), attempt);
    const current = this.latest.get(attempt.rolloutId);
    if (this.latest.has(attempt.rolloutId) && (!current || attempt.sequenceId >= current.sequenceId)) {
      this.latest.set(attempt.rolloutId, attempt);
    }
  }

  async insertRollouts(items: Rollout[]): Promise<void> {
    await this.tx.insertRollouts(items);
    for (const rollout of items) this.rollouts.set(rollout.rolloutId, deepCopy(rollout));
  }

  async getRollout(id: string): Promise<Rollout | undefined> {
    if (!this.rollouts.has(id)) this.rollouts.set(id, await this.tx.getRollout(id));
    return this.rollouts.get(id);
  }

  async putRollout(rollout: Rollout): Promise<void> {
    this.rollouts.set(rollout.rolloutId, rollout);
    this.dirtyRollouts.set(rollout.rolloutId, rollout);
  }

  async insertAttempt(attempt: Attempt): Promise<void> {
    await this.tx.insertAttempt(attempt);
    const copy = deepCopy(attempt);
    this.latest.set(attempt.rolloutId, copy);
    this.rememberAttempt(copy);
    this.onAttempt?.(copy, this.rollouts.get(attempt.rolloutId));
  }

  async getAttempt(rolloutId: string, attemptId: string): Promise<Attempt | undefined> {
    const key = attemptKey(rolloutId, attemptId);
    if (!this.attempts.has(key)) {
      const attempt = await this.tx.getAttempt(rolloutId, attemptId);
      if (!attempt) return undefined;
      this.rememberAttempt(attempt);
    }
    return this.attempts.get(key);
  }

  async latestAttempts(ids: string[]): Promise<Map<string, Attempt>> {
    const missing = ids.filter((id) => !this.latest.has(id));
    if (missing.length > 0) {
      const found = await this.tx.latestAttempts(missing);
      for (const id of missing) {
        const attempt = found.get(id);
        // Prefer an attempt object this transaction already holds, so every reader sees the same row.
        const known = attempt && this.attempts.get(attemptKey(id, attempt.attemptId));
        this.latest.set(id, known ?? attempt);
        if (attempt && !known) this.rememberAttempt(attempt);
      }
    }
    const result = new Map<string, Attempt>();
    for (const id of ids) {
      const attempt = this.latest.get(id);
      if (attempt) result.set(id, attempt);
    }
    return result;
  }

  async putAttempt(attempt: Attempt): Promise<void> {
    this.rememberAttempt(attempt);
    this.dirtyAttempts.set(attemptKey(attempt.rolloutId, attempt.attemptId), attempt);
    this.onAttempt?.(attempt, this.rollouts.get(attempt.rolloutId));
  }

  async getWorker(id: string): Promise<Worker | undefined> {
    if (!this.workers.has(id)) this.workers.set(id, await this.tx.getWorker(id));
    return this.workers.get(id);
  }

  async putWorker(worker: Worker): Promise<void> {
    this.workers.set(worker.workerId, worker);
    this.dirtyWorkers.set(worker.workerId, worker);
  }

  // Everything else passes through once pending writes are flushed.
  async queryRollouts(filter: RolloutFilter, page: PageSpec): Promise<PageResult<Rollout>> {
    if (this.dirty) await this.flush();
    return this.tx.queryRollouts(filter, page);
  }

  async activeRollouts(): Promise<Rollout[]> {
    if (this.dirty) await this.flush();
    return this.tx.activeRollouts();
  }

  async queryAttempts(rolloutId: string, page: PageSpec): Promise<PageResult<Attempt>> {
    if (this.dirty) await this.flush();
    return this.tx.queryAttempts(rolloutId, page);
  }

  async enqueue(ids: string[]): Promise<void> {
    if (this.dirty) await this.flush();
    return this.tx.enqueue(ids);
  }

  async dequeue(limit: number): Promise<string[]> {
    if (this.dirty) await this.flush();
    return this.tx.dequeue(limit);
  }

  async insertSpans(spans: Span[]): Promise<Array<{ sequenceId: number; duplicate: boolean }>> {
    if (this.dirty) await this.flush();
    return this.tx.insertSpans(spans);
  }

  async existingSpans(keys: Array<[string, string, string]>): Promise<Map<string, number>> {
    if (this.dirty) await this.flush();
    return this.tx.existingSpans(keys);
  }

  async querySpans(filter: SpanFilter, page: PageSpec): Promise<PageResult<Span>> {
    if (this.dirty) await this.flush();
    return this.tx.querySpans(filter, page);
  }

  async nextSequenceId(rolloutId: string, count: number): Promise<number> {
    if (this.dirty) await this.flush();
    return this.tx.nextSequenceId(rolloutId, count);
  }

  async raiseSequenceId(rolloutId: string, value: number): Promise<void> {
    if (this.dirty) await this.flush();
    return this.tx.raiseSequenceId(rolloutId, value);
  }

  async insertResources(update: ResourcesUpdate): Promise<void> {
    if (this.dirty) await this.flush();
    return this.tx.insertResources(update);
  }

  async putResources(update: ResourcesUpdate): Promise<void> {
    if (this.dirty) await this.flush();
    return this.tx.putResources(update);
  }

  async getResources(id: string): Promise<ResourcesUpdate | undefined> {
    if (this.dirty) await this.flush();
    return this.tx.getResources(id);
  }

  async latestResources(): Promise<ResourcesUpdate | undefined> {
    if (this.dirty) await this.flush();
    return this.tx.latestResources();
  }

  async queryResources(filter: ResourcesFilter, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    if (this.dirty) await this.flush();
    return this.tx.queryResources(filter, page);
  }

  async getResourcesVersion(id: string, version: number): Promise<ResourcesUpdate | undefined> {
    if (this.dirty) await this.flush();
    return this.tx.getResourcesVersion(id, version);
  }

  async queryResourceVersions(id: string, page: PageSpec): Promise<PageResult<ResourcesUpdate>> {
    if (this.dirty) await this.flush();
    return this.tx.queryResourceVersions(id, page);
  }

  async queryWorkers(filter: WorkerFilter, page: PageSpec): Promise<PageResult<Worker>> {
    if (this.dirty) await this.flush();
    return this.tx.queryWorkers(filter, page);
  }

  async counts(): Promise<StorageCounts> {
    if (this.dirty) await this.flush();
    return this.tx.counts();
  }

  async firstRolloutStartTime(): Promise<number | undefined> {
    if (this.dirty) await this.flush();
    return this.tx.firstRolloutStartTime();
  }

  async rolloutTimeline(query: TimelineQuery): Promise<Timeline> {
    if (this.dirty) await this.flush();
    return this.tx.rolloutTimeline(query);
  }

  async rewardGroups(scope: RolloutScope): Promise<RewardGroup[]> {
    if (this.dirty) await this.flush();
    return this.tx.rewardGroups(scope);
  }

  async finalRewards(rolloutIds: string[]): Promise<Map<string, number>> {
    if (this.dirty) await this.flush();
    return this.tx.finalRewards(rolloutIds);
  }

  notify(event: StoreEvent): void {
    this.tx.notify(event);
  }
}
