import type { Attempt, ResourcesUpdate, Rollout, RolloutMode, RolloutStatus, Span, Worker, WorkerStatus } from "../gen/agl/v1/types_pb.js";

/**
 * Storage for the store: a set of typed tables behind transactions. The state machine lives in the store core
 * (`store.ts`) and runs unchanged on every backend, so semantics are identical by construction; a backend only
 * persists, filters, sorts and paginates.
 *
 * Rules every backend keeps:
 * - A backend never keeps a reference to an object passed in or handed out: callers may mutate both freely. The
 *   one exception: spans never change once stored, so a backend may hand out stored spans frozen and shared.
 * - Rollouts are stored without `latestAttempt`; the core attaches it.
 * - Ties in any sort keep insertion order, in ascending and descending order alike.
 * - Null optional times sort as +infinity (last ascending, first descending).
 */
export interface StorageBackend {
  /** "memory", "sqlite" or "postgres". */
  readonly name: string;
  /**
   * Runs `fn` atomically and in isolation from other transactions. If `fn` throws, nothing it wrote is kept.
   * Events passed to `tx.notify` are delivered to subscribers (of every process sharing the storage) after commit.
   * `fn` may run more than once (PostgreSQL after a conflict; SQLite when a later call of its commit group failed
   * after writing): only the last run's writes, events and result count, so it must not change anything outside the
   * transaction that a second run would not leave the same.
   */
  transaction<T>(fn: (tx: StorageTx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * Subscribes to committed events; returns the unsubscribe function. Every call is a subscription of its own (see
   * `createListeners`): a function subscribed twice hears each event twice until both are ended.
   */
  subscribe(listener: (event: StoreEvent) => void): () => void;
  /**
   * Optional: keeps the spans this process stores in memory, for a reader in this process that will read them soon
   * (a following triplet stream), until the returned function is called. Without one they are not kept: holding every
   * span a while would cost memory and garbage collection for nothing.
   */
  keepSpans?(): () => void;
  close(): Promise<void>;
}

/** What the caller knows of a transaction; backends that lock rows (PostgreSQL) use it to choose how. */
export interface TransactionOptions {
  /** true: it only reads; false: it writes (rows it reads may be locked from the start); absent: unknown. */
  readOnly?: boolean;
}

/**
 * What happened, for waiters: new queue entries, finished rollouts, published resources. A `resources` event
 * carries the published version itself, so watchers see every version even when updates follow each other fast.
 */
export type StoreEvent = { kind: "queued" } | { kind: "finished"; rolloutIds: string[] } | { kind: "resources"; update: ResourcesUpdate };

/** A window of a query result with the number of matches before pagination. */
export interface PageResult<T> {
  items: T[];
  total: number;
}

/** Normalised pagination: `limit` < 0 means all. `sortBy` is a proto field name the core has validated. */
export interface PageSpec {
  sortBy?: string;
  descending: boolean;
  limit: number;
  offset: number;
}

/** A string condition: equal to, or containing, a value. */
export interface StringMatch {
  exact?: string;
  contains?: string;
}

/** A half-open interval of epoch seconds, [from, to); an absent bound is open. */
export interface TimeRange {
  from?: number;
  to?: number;
}

/** Restrictions on rollouts that always hold together (AND), whatever the filter logic. */
export interface RolloutScope {
  modeIn?: RolloutMode[];
  resourcesIdIn?: string[];
  /** Rollout.resources_version; undefined means any. */
  resourcesVersion?: number;
  /** On start_time (creation). */
  startTime?: TimeRange;
  /** On end_time: unfinished rollouts never match a range. */
  endTime?: TimeRange;
  statusIn?: RolloutStatus[];
}

/**
 * Conditions combined by `any` (OR) or all (AND). An empty set of conditions matches everything. `scope` always
 * restricts (AND) on top.
 */
export interface RolloutFilter {
  statusIn?: RolloutStatus[];
  rolloutIdIn?: string[];
  rolloutIdContains?: string;
  groupId?: string;
  any: boolean;
  scope?: RolloutScope;
}

export interface SpanFilter {
  rolloutId: string;
  /** Restricts to one attempt; undefined means every attempt. Always AND-ed, like `rolloutId`. */
  attemptId?: string;
  /** Only spans with a greater sequence id; always AND-ed. */
  afterSequenceId?: number;
  traceId?: StringMatch;
  spanId?: StringMatch;
  parentId?: StringMatch;
  name?: StringMatch;
  any: boolean;
}

export interface WorkerFilter {
  statusIn?: WorkerStatus[];
  workerIdContains?: string;
  any: boolean;
}

export interface ResourcesFilter {
  resourcesId?: string;
  resourcesIdContains?: string;
}

/** Counts for statistics. */
export interface StorageCounts {
  rollouts: number;
  attempts: number;
  spans: number;
  resources: number;
  workers: number;
  queueLength: number;
  rolloutsByStatus: Map<RolloutStatus, number>;
}

/** Rollouts of one mode and status counted in one time bucket (its index from the window's start). */
export interface BucketCount {
  bucket: number;
  mode: RolloutMode;
  status: RolloutStatus;
  count: number;
}

/** A timeline's window, cut into buckets of `bucketSeconds` from `start` (the last one ends at `end`). */
export interface TimelineQuery {
  start: number;
  end: number;
  bucketSeconds: number;
  scope: RolloutScope;
}

/** The rollouts created and finished in each bucket, by mode and status (zero counts left out, in any order). */
export interface Timeline {
  created: BucketCount[];
  finished: BucketCount[];
}

/**
 * The raw sums of one group of rollouts (same resources id, version and mode) for reward statistics. `rewarded`,
 * `rewardSum`, `rewardSquares`, `rewardMin` and `rewardMax` are over the final rewards of the group's rollouts that
 * have one: the reward span with the highest sequence id of the rollout's latest attempt.
 */
export interface RewardGroup {
  resourcesId: string;
  resourcesVersion: number;
  mode: RolloutMode;
  rollouts: number;
  rewarded: number;
  rewardSum: number;
  rewardSquares: number;
  rewardMin?: number;
  rewardMax?: number;
  /**
   * LLM calls recorded with their token ids in the spans of the group's rollouts (every attempt): spans of a rollout
   * that share a response id count once, with their largest token counts.
   */
  llmCalls: number;
  promptTokens: number;
  responseTokens: number;
  firstStartTime: number;
  lastStartTime: number;
}

/** The operations of one transaction. */
export interface StorageTx {
  insertRollouts(rollouts: Rollout[]): Promise<void>;
  getRollout(rolloutId: string): Promise<Rollout | undefined>;
  /** Replaces a stored rollout (matched by id). */
  putRollout(rollout: Rollout): Promise<void>;
  queryRollouts(filter: RolloutFilter, page: PageSpec): Promise<PageResult<Rollout>>;
  /** Rollouts in status preparing or running: the watchdog's candidates. */
  activeRollouts(): Promise<Rollout[]>;

  insertAttempt(attempt: Attempt): Promise<void>;
  getAttempt(rolloutId: string, attemptId: string): Promise<Attempt | undefined>;
  /** The attempt with the highest sequence id of each given rollout that has one. */
  latestAttempts(rolloutIds: string[]): Promise<Map<string, Attempt>>;
  /** Replaces a stored attempt (matched by rollout id and attempt id). */
  putAttempt(attempt: Attempt): Promise<void>;
  /** Default order: sequence id ascending. */
  queryAttempts(rolloutId: string, page: PageSpec): Promise<PageResult<Attempt>>;

  /** Appends ids that are not in the queue yet, in order. */
  enqueue(rolloutIds: string[]): Promise<void>;
  /** Removes and returns up to `limit` ids from the head of the queue. */
  dequeue(limit: number): Promise<string[]>;

  /**
   * Inserts spans whose (rollout id, attempt id, span id) is new. Returns, per input span, the sequence id of the
   * span stored under that key and whether it was already there (then the stored span is left unchanged).
   */
  insertSpans(spans: Span[]): Promise<Array<{ sequenceId: number; duplicate: boolean }>>;
  /** Which of the keys are stored already, with their sequence ids (keyed by {@link spanKey}). */
  existingSpans(keys: Array<[string, string, string]>): Promise<Map<string, number>>;
  /** Default order: sequence id ascending. */
  querySpans(filter: SpanFilter, page: PageSpec): Promise<PageResult<Span>>;
  /** Advances the rollout's span counter by `count` and returns the new value (the last id issued). */
  nextSequenceId(rolloutId: string, count: number): Promise<number>;
  /** Raises the rollout's span counter to at least `value`. */
  raiseSequenceId(rolloutId: string, value: number): Promise<void>;

  insertResources(update: ResourcesUpdate): Promise<void>;
  putResources(update: ResourcesUpdate): Promise<void>;
  getResources(resourcesId: string): Promise<ResourcesUpdate | undefined>;
  /** The snapshot written last by insertResources or putResources. */
  latestResources(): Promise<ResourcesUpdate | undefined>;
  queryResources(filter: ResourcesFilter, page: PageSpec): Promise<PageResult<ResourcesUpdate>>;
  /** A version of a snapshot id as published (every version written by insertResources or putResources is kept). */
  getResourcesVersion(resourcesId: string, version: number): Promise<ResourcesUpdate | undefined>;
  /** Every kept version of a snapshot id. Default order: version ascending. */
  queryResourceVersions(resourcesId: string, page: PageSpec): Promise<PageResult<ResourcesUpdate>>;

  getWorker(workerId: string): Promise<Worker | undefined>;
  /** Inserts or replaces a worker. */
  putWorker(worker: Worker): Promise<void>;
  queryWorkers(filter: WorkerFilter, page: PageSpec): Promise<PageResult<Worker>>;

  counts(): Promise<StorageCounts>;

  /** The creation time of the first rollout, or undefined when there is none. */
  firstRolloutStartTime(): Promise<number | undefined>;
  /** Rollouts in `query.scope`, counted per bucket of their start time (created) and of their end time (finished). */
  rolloutTimeline(query: TimelineQuery): Promise<Timeline>;
  /** Reward sums of the rollouts in `scope`, per (resources id, resources version, mode), in any order. */
  rewardGroups(scope: RolloutScope): Promise<RewardGroup[]>;
  /** The final reward of each given rollout that has one (see {@link RewardGroup}). */
  finalRewards(rolloutIds: string[]): Promise<Map<string, number>>;

  /** Queues an event for delivery after commit. */
  notify(event: StoreEvent): void;
}

/** The key of a stored span: its rollout, attempt and span ids. */
export const spanKey = (rolloutId: string, attemptId: string, spanId: string) => `${rolloutId}\0${attemptId}\0${spanId}`;

/** A map key for an attempt (its rollout's id and its own). */
export const attemptKey = (rolloutId: string, attemptId: string) => `${rolloutId}\0${attemptId}`;

/** Sortable fields per table (proto names); the core rejects others with INVALID_ARGUMENT. */
export const sortableFields = {
  rollouts: ["rollout_id", "start_time", "end_time", "status", "mode", "resources_id", "resources_version", "group_id"],
  attempts: ["sequence_id", "attempt_id", "start_time", "end_time", "status", "worker_id", "last_heartbeat_time"],
  spans: ["sequence_id", "start_time", "end_time", "name", "span_id", "trace_id", "parent_id"],
  workers: ["worker_id", "status", "last_heartbeat_time", "last_dequeue_time", "last_busy_time", "last_idle_time"],
  resources: ["resources_id", "create_time", "update_time", "version"],
  resource_versions: ["version"],
} as const;

/** The tables a query pages through. */
export type TableName = keyof typeof sortableFields;
