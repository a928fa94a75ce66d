import type { Attempt, Rollout, Worker } from "../gen/agl/v1/types_pb.js";
import { attemptKey, type StorageTx } from "./backend.js";
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
  const rollouts = new Map<string, Rollout | undefined>();
  const attempts = new Map<string, Attempt>();
  const latest = new Map<string, Attempt | undefined>();
  const workers = new Map<string, Worker | undefined>();
  // Keyed by id: when a row is put again (possibly as another object), the last put wins.
  const dirtyRollouts = new Map<string, Rollout>();
  const dirtyAttempts = new Map<string, Attempt>();
  const dirtyWorkers = new Map<string, Worker>();

  async function flush() {
    for (const rollout of dirtyRollouts.values()) await tx.putRollout(rollout);
    for (const attempt of dirtyAttempts.values()) await tx.putAttempt(attempt);
    for (const worker of dirtyWorkers.values()) await tx.putWorker(worker);
    dirtyRollouts.clear();
    dirtyAttempts.clear();
    dirtyWorkers.clear();
  }
  const rememberAttempt = (attempt: Attempt) => {
    attempts.set(attemptKey(attempt.rolloutId, attempt.attemptId), attempt);
    const current = latest.get(attempt.rolloutId);
    if (latest.has(attempt.rolloutId) && (!current || attempt.sequenceId >= current.sequenceId)) {
      latest.set(attempt.rolloutId, attempt);
    }
  };

  return {
    flush,
    async insertRollouts(items) {
      await tx.insertRollouts(items);
      for (const rollout of items) rollouts.set(rollout.rolloutId, deepCopy(rollout));
    },
    async getRollout(id) {
      if (!rollouts.has(id)) rollouts.set(id, await tx.getRollout(id));
      return rollouts.get(id);
    },
    async putRollout(rollout) {
      rollouts.set(rollout.rolloutId, rollout);
      dirtyRollouts.set(rollout.rolloutId, rollout);
    },
    async insertAttempt(attempt) {
      await tx.insertAttempt(attempt);
      const copy = deepCopy(attempt);
      latest.set(attempt.rolloutId, copy);
      rememberAttempt(copy);
      onAttempt?.(copy, rollouts.get(attempt.rolloutId));
    },
    async getAttempt(rolloutId, attemptId) {
      const key = attemptKey(rolloutId, attemptId);
      if (!attempts.has(key)) {
        const attempt = await tx.getAttempt(rolloutId, attemptId);
        if (!attempt) return undefined;
        rememberAttempt(attempt);
      }
      return attempts.get(key);
    },
    async latestAttempts(ids) {
      const missing = ids.filter((id) => !latest.has(id));
      if (missing.length > 0) {
        const found = await tx.latestAttempts(missing);
        for (const id of missing) {
          const attempt = found.get(id);
          // Prefer an attempt object this transaction already holds, so every reader sees the same row.
          const known = attempt && attempts.get(attemptKey(id, attempt.attemptId));
          latest.set(id, known ?? attempt);
          if (attempt && !known) rememberAttempt(attempt);
        }
      }
      const result = new Map<string, Attempt>();
      for (const id of ids) {
        const attempt = latest.get(id);
        if (attempt) result.set(id, attempt);
      }
      return result;
    },
    async putAttempt(attempt) {
      rememberAttempt(attempt);
      dirtyAttempts.set(attemptKey(attempt.rolloutId, attempt.attemptId), attempt);
      onAttempt?.(attempt, rollouts.get(attempt.rolloutId));
    },
    async getWorker(id) {
      if (!workers.has(id)) workers.set(id, await tx.getWorker(id));
      return workers.get(id);
    },
    async putWorker(worker) {
      workers.set(worker.workerId, worker);
      dirtyWorkers.set(worker.workerId, worker);
    },
    // Everything else passes through once pending writes are flushed.
    async queryRollouts(filter, page) {
      await flush();
      return tx.queryRollouts(filter, page);
    },
    async activeRollouts() {
      await flush();
      return tx.activeRollouts();
    },
    async queryAttempts(rolloutId, page) {
      await flush();
      return tx.queryAttempts(rolloutId, page);
    },
    async enqueue(ids) {
      await flush();
      return tx.enqueue(ids);
    },
    async dequeue(limit) {
      await flush();
      return tx.dequeue(limit);
    },
    async insertSpans(spans) {
      await flush();
      return tx.insertSpans(spans);
    },
    async existingSpans(keys) {
      await flush();
      return tx.existingSpans(keys);
    },
    async querySpans(filter, page) {
      await flush();
      return tx.querySpans(filter, page);
    },
    async nextSequenceId(rolloutId, count) {
      await flush();
      return tx.nextSequenceId(rolloutId, count);
    },
    async raiseSequenceId(rolloutId, value) {
      await flush();
      return tx.raiseSequenceId(rolloutId, value);
    },
    async insertResources(update) {
      await flush();
      return tx.insertResources(update);
    },
    async putResources(update) {
      await flush();
      return tx.putResources(update);
    },
    async getResources(id) {
      await flush();
      return tx.getResources(id);
    },
    async latestResources() {
      await flush();
      return tx.latestResources();
    },
    async queryResources(filter, page) {
      await flush();
      return tx.queryResources(filter, page);
    },
    async getResourcesVersion(id, version) {
      await flush();
      return tx.getResourcesVersion(id, version);
    },
    async queryResourceVersions(id, page) {
      await flush();
      return tx.queryResourceVersions(id, page);
    },
    async queryWorkers(filter, page) {
      await flush();
      return tx.queryWorkers(filter, page);
    },
    async counts() {
      await flush();
      return tx.counts();
    },
    async firstRolloutStartTime() {
      await flush();
      return tx.firstRolloutStartTime();
    },
    async rolloutTimeline(query) {
      await flush();
      return tx.rolloutTimeline(query);
    },
    async rewardGroups(scope) {
      await flush();
      return tx.rewardGroups(scope);
    },
    async finalRewards(rolloutIds) {
      await flush();
      return tx.finalRewards(rolloutIds);
    },
    notify: (event) => tx.notify(event),
  };
}
