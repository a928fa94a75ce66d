import { Code, ConnectError } from "@connectrpc/connect";
import type { Attempt, ResourcesUpdate, Rollout, Span, Worker } from "../../../gen/agl/v1/types_pb.js";
import { RolloutStatus } from "../../../gen/agl/v1/types_pb.js";
import { spanKey, type StorageBackend, type StorageCounts, type StorageTx, type StoreEvent } from "../../backend.js";
import { deepCopy, deepFreeze } from "../../deep-copy.js";
import { ReceivedSpan } from "../../received-span.js";
import { isHandedOver } from "../../span-wire.js";
import { combine, fieldValue, matchString, sortAndPage } from "./memory-query.js";
import { finalReward, inScope, rewardGroups, rolloutTimeline } from "./memory-aggregates.js";
import { createConsoleLogger, type Logger } from "../../../core/logger.js";
import { createListeners } from "../../listeners.js";
import { createMutex } from "../../mutex.js";

const isActive = (status: RolloutStatus) => status === RolloutStatus.PREPARING || status === RolloutStatus.RUNNING;

/** Storage in this process's memory: the fastest backend, for tests and `agl serve --memory`. */
export interface MemoryBackendOptions {
  /** Where a failing event listener is reported (default: stderr, `[store]`). */
  logger?: Logger;
}

/**
 * A stored span as a reader gets it, so that no reader can change what another reads: one received as bytes decoded
 * for each read, as the SQL backends do; any other frozen through, and shared. Only the spans a read returns are
 * decoded (a count decodes none), and none as it is stored: most spans are read once or never.
 */
const asRead = (span: Span): Span => (span instanceof ReceivedSpan ? span.toPlain() : deepFreeze(span));

export function createMemoryBackend(options: MemoryBackendOptions = {}): StorageBackend {
  const rollouts = new Map<string, Rollout>();
  const active = new Set<string>();
  const attempts = new Map<string, Attempt[]>();
  const queue: string[] = [];
  const queued = new Set<string>();
  const spans = new Map<string, Span[]>();
  // Sequence ids of stored spans by rollout, then by attempt and span id: small maps, where one map of every span
  // ever stored made each lookup a cache miss.
  const spanSeq = new Map<string, Map<string, number>>();
  const keyInRollout = (attemptId: string, spanId: string) => `${attemptId}\0${spanId}`;
  let spanCount = 0;
  const counters = new Map<string, number>();
  const resources = new Map<string, ResourcesUpdate>();
  let latestResourcesId: string | undefined;
  const resourceVersions = new Map<string, ResourcesUpdate[]>();
  const workers = new Map<string, Worker>();
  const listeners = createListeners(options.logger ?? createConsoleLogger({ prefix: "[store]" }));
  const mutex = createMutex();
  let closed = false;

  // Every write records how to undo itself, so a transaction that throws leaves no trace.
  let undo: Array<() => void> = [];
  let events: StoreEvent[] = [];

  const setRollout = (item: Rollout) => {
    const rollout = deepCopy(item);
    rollout.latestAttempt = undefined;
    const id = rollout.rolloutId;
    const previous = rollouts.get(id);
    const wasActive = active.has(id);
    undo.push(() => {
      if (previous) rollouts.set(id, previous);
      else rollouts.delete(id);
      if (wasActive) active.add(id);
      else active.delete(id);
    });
    rollouts.set(id, rollout);
    if (isActive(rollout.status)) active.add(id);
    else active.delete(id);
  };

  const replaceIn = <T>(list: T[], index: number, item: T) => {
    const previous = list[index] as T;
    undo.push(() => {
      list[index] = previous;
    });
    list[index] = item;
  };

  const tables = { rollouts, attempts, spans };

  const tx: StorageTx = {
    async insertRollouts(items) {
      for (const rollout of items) {
        if (rollouts.has(rollout.rolloutId)) throw new Error(`rollout ${rollout.rolloutId} is stored already`);
        setRollout(rollout);
      }
    },
    async getRollout(id) {
      const rollout = rollouts.get(id);
      return rollout && deepCopy(rollout);
    },
    async putRollout(rollout) {
      setRollout(rollout);
    },
    async queryRollouts(filter, page) {
      const statuses = filter.statusIn?.length ? new Set(filter.statusIn) : undefined;
      const ids = filter.rolloutIdIn?.length ? new Set(filter.rolloutIdIn) : undefined;
      const matches = [...rollouts.values()].filter((r) => {
        const conditions: boolean[] = [];
        if (statuses) conditions.push(statuses.has(r.status));
        if (ids) conditions.push(ids.has(r.rolloutId));
        if (filter.rolloutIdContains) conditions.push(r.rolloutId.includes(filter.rolloutIdContains));
        if (filter.groupId) conditions.push(r.groupId === filter.groupId);
        return combine(conditions, filter.any) && inScope(r, filter.scope);
      });
      return sortAndPage(matches, page, fieldValue);
    },
    async activeRollouts() {
      return [...active].map((id) => deepCopy(rollouts.get(id) as Rollout));
    },

    async insertAttempt(attempt) {
      let list = attempts.get(attempt.rolloutId);
      if (!list) {
        list = [];
        attempts.set(attempt.rolloutId, list);
      }
      const target = list;
      undo.push(() => target.pop());
      target.push(deepCopy(attempt));
    },
    async getAttempt(rolloutId, attemptId) {
      const attempt = attempts.get(rolloutId)?.find((a) => a.attemptId === attemptId);
      return attempt && deepCopy(attempt);
    },
    async latestAttempts(rolloutIds) {
      const result = new Map<string, Attempt>();
      for (const id of rolloutIds) {
        let last: Attempt | undefined;
        for (const attempt of attempts.get(id) ?? []) if (!last || attempt.sequenceId > last.sequenceId) last = attempt;
        if (last) result.set(id, deepCopy(last));
      }
      return result;
    },
    async putAttempt(attempt) {
      const list = attempts.get(attempt.rolloutId) ?? [];
      const index = list.findIndex((a) => a.attemptId === attempt.attemptId);
      if (index < 0) throw new Error(`attempt ${attempt.attemptId} is not stored`);
      replaceIn(list, index, deepCopy(attempt));
    },
    async queryAttempts(rolloutId, page) {
      return sortAndPage(attempts.get(rolloutId) ?? [], page, fieldValue, "sequence_id");
    },

    async enqueue(ids) {
      for (const id of ids) {
        if (queued.has(id)) continue;
        queued.add(id);
        queue.push(id);
        undo.push(() => {
          queue.pop();
          queued.delete(id);
        });
      }
    },
    async dequeue(limit) {
      const taken = queue.splice(0, limit);
      for (const id of taken) queued.delete(id);
      undo.push(() => {
        queue.unshift(...taken);
        for (const id of taken) queued.add(id);
      });
      return taken;
    },

    async insertSpans(batch) {
      return batch.map((span) => {
        const key = keyInRollout(span.attemptId, span.spanId);
        let seqs = spanSeq.get(span.rolloutId);
        if (!seqs) {
          seqs = new Map();
          spanSeq.set(span.rolloutId, seqs);
        }
        const existing = seqs.get(key);
        if (existing !== undefined) return { sequenceId: existing, duplicate: true };
        let list = spans.get(span.rolloutId);
        if (!list) {
          list = [];
          spans.set(span.rolloutId, list);
        }
        const target = list;
        // Spans never change once stored (see asRead). One received as bytes is kept in them; one handed over is
        // kept as it is; any other is copied, as its caller may still change its objects.
        target.push(span instanceof ReceivedSpan ? span.withOwnBytes() : isHandedOver(span) ? span : deepCopy(span));
        const inRollout = seqs;
        inRollout.set(key, span.sequenceId);
        spanCount++;
        undo.push(() => {
          target.pop();
          inRollout.delete(key);
          spanCount--;
        });
        return { sequenceId: span.sequenceId, duplicate: false };
      });
    },
    async existingSpans(keys) {
      const found = new Map<string, number>();
      for (const [rolloutId, attemptId, spanId] of keys) {
        const seq = spanSeq.get(rolloutId)?.get(keyInRollout(attemptId, spanId));
        if (seq !== undefined) found.set(spanKey(rolloutId, attemptId, spanId), seq);
      }
      return found;
    },
    async querySpans(filter, page) {
      const matches = (spans.get(filter.rolloutId) ?? []).filter((s) => {
        if (filter.attemptId !== undefined && s.attemptId !== filter.attemptId) return false;
        if (filter.afterSequenceId !== undefined && s.sequenceId <= filter.afterSequenceId) return false;
        const conditions: boolean[] = [];
        matchString(s.traceId, filter.traceId, conditions);
        matchString(s.spanId, filter.spanId, conditions);
        matchString(s.parentId, filter.parentId, conditions);
        matchString(s.name, filter.name, conditions);
        return combine(conditions, filter.any);
      });
      return sortAndPage(matches, page, fieldValue, "sequence_id", asRead);
    },
    async nextSequenceId(rolloutId, count) {
      const previous = counters.get(rolloutId);
      const next = (previous ?? 0) + count;
      counters.set(rolloutId, next);
      undo.push(() => (previous === undefined ? counters.delete(rolloutId) : counters.set(rolloutId, previous)));
      return next;
    },
    async raiseSequenceId(rolloutId, value) {
      const previous = counters.get(rolloutId);
      if ((previous ?? 0) >= value) return;
      counters.set(rolloutId, value);
      undo.push(() => (previous === undefined ? counters.delete(rolloutId) : counters.set(rolloutId, previous)));
    },

    async insertResources(update) {
      if (resources.has(update.resourcesId)) throw new Error(`resources ${update.resourcesId} are stored already`);
      await tx.putResources(update);
    },
    async putResources(update) {
      const id = update.resourcesId;
      const previous = resources.get(id);
      const previousLatest = latestResourcesId;
      undo.push(() => {
        if (previous) resources.set(id, previous);
        else resources.delete(id);
        latestResourcesId = previousLatest;
      });
      resources.set(id, deepCopy(update));
      latestResourcesId = id;
      const versions = resourceVersions.get(id) ?? resourceVersions.set(id, []).get(id)!;
      const index = versions.findIndex((v) => v.version === update.version);
      if (index >= 0) replaceIn(versions, index, deepCopy(update));
      else {
        versions.push(deepCopy(update));
        undo.push(() => versions.pop());
      }
    },
    async getResourcesVersion(id, version) {
      const update = resourceVersions.get(id)?.find((v) => v.version === version);
      return update && deepCopy(update);
    },
    async queryResourceVersions(id, page) {
      return sortAndPage(resourceVersions.get(id) ?? [], page, fieldValue, "version");
    },
    async getResources(id) {
      const update = resources.get(id);
      return update && deepCopy(update);
    },
    async latestResources() {
      const update = latestResourcesId === undefined ? undefined : resources.get(latestResourcesId);
      return update && deepCopy(update);
    },
    async queryResources(filter, page) {
      const matches = [...resources.values()].filter(
        (r) =>
          (filter.resourcesId === undefined || r.resourcesId === filter.resourcesId) &&
          (filter.resourcesIdContains === undefined || r.resourcesId.includes(filter.resourcesIdContains)),
      );
      return sortAndPage(matches, page, fieldValue);
    },

    async getWorker(id) {
      const worker = workers.get(id);
      return worker && deepCopy(worker);
    },
    async putWorker(worker) {
      const id = worker.workerId;
      const previous = workers.get(id);
      undo.push(() => (previous ? workers.set(id, previous) : workers.delete(id)));
      workers.set(id, deepCopy(worker));
    },
    async queryWorkers(filter, page) {
      const statuses = filter.statusIn?.length ? new Set(filter.statusIn) : undefined;
      const matches = [...workers.values()].filter((w) => {
        const conditions: boolean[] = [];
        if (statuses) conditions.push(statuses.has(w.status));
        if (filter.workerIdContains) conditions.push(w.workerId.includes(filter.workerIdContains));
        return combine(conditions, filter.any);
      });
      return sortAndPage(matches, page, fieldValue);
    },

    async counts(): Promise<StorageCounts> {
      const rolloutsByStatus = new Map<RolloutStatus, number>();
      for (const r of rollouts.values()) rolloutsByStatus.set(r.status, (rolloutsByStatus.get(r.status) ?? 0) + 1);
      let attemptCount = 0;
      for (const list of attempts.values()) attemptCount += list.length;
      return {
        rollouts: rollouts.size,
        attempts: attemptCount,
        spans: spanCount,
        resources: resources.size,
        workers: workers.size,
        queueLength: queue.length,
        rolloutsByStatus,
      };
    },

    async firstRolloutStartTime() {
      let first: number | undefined;
      for (const r of rollouts.values()) if (first === undefined || r.startTime < first) first = r.startTime;
      return first;
    },
    async rolloutTimeline(query) {
      return rolloutTimeline(tables, query);
    },
    async rewardGroups(scope) {
      return rewardGroups(tables, scope);
    },
    async finalRewards(rolloutIds) {
      const result = new Map<string, number>();
      for (const id of rolloutIds) {
        const reward = finalReward(tables, id);
        if (reward !== undefined) result.set(id, reward);
      }
      return result;
    },

    notify(event) {
      events.push(event);
    },
  };

  return {
    name: "memory",
    transaction(fn) {
      return mutex.run(async () => {
        if (closed) throw new ConnectError("the store is closed", Code.Unavailable);
        undo = [];
        events = [];
        try {
          const result = await fn(tx);
          const committed = events;
          events = [];
          for (const event of committed) listeners.deliver(event);
          return result;
        } catch (error) {
          for (let i = undo.length - 1; i >= 0; i--) undo[i]?.();
          throw error;
        } finally {
          undo = [];
          events = [];
        }
      });
    },
    subscribe(listener) {
      return listeners.subscribe(listener);
    },
    async close() {
      await mutex.run(async () => {
        closed = true;
      });
      listeners.clear();
    },
  };
}
