import type { Attempt, Span } from "../../../gen/agl/v1/types_pb.js";

/**
 * Rows of the SQLite backend that its connection last read or wrote, kept across transactions as their stored bytes:
 * each reader decodes its own copy, so no caller's edits reach the cache. A rollout's calls read the same rollout,
 * attempt and worker rows again and again (the claim, each span batch, the final update), and each read was a
 * statement and a B-tree search: 10–15 % of the serving thread's time under `bench/store`. Rows this connection wrote
 * keep their column values too: the next rewrite sets only the columns that changed (see sqlite-column-updates).
 *
 * The spans of rollouts this connection created are the exception: it keeps the span objects as they were stored
 * (see {@link RolloutSpans}).
 *
 * It holds only while this connection is the only writer. The backend clears it when `PRAGMA data_version` says another
 * connection committed, forgets the rows of a call it undoes, and clears it when a group fails.
 */
export class RowCache {
  readonly rollouts = new BoundedRows(16 << 20);
  /** By `attemptKey`. */
  readonly attempts = new BoundedRows(16 << 20);
  readonly workers = new BoundedRows(4 << 20);
  /** Each rollout's latest attempt, by rollout id; null: the rollout has no attempt yet. */
  private readonly latest = new Map<string, LatestAttempt | null>();
  /** The spans of rollouts this connection created, by rollout id, once one was asked about (see {@link RolloutSpans}). */
  private readonly spans = new Map<string, RolloutSpans>();
  /**
   * Rollouts this connection created and nobody asked about yet (they have no spans), oldest first, each with the
   * `keepGeneration` it was created in, or -1 when spans were not kept then. A few dozen bytes each where an entry of
   * `spans` holds a map: a queue of many thousand rollouts is remembered until its rollouts run.
   */
  private readonly created = new Map<string, number>();
  /** Counts the times keeping spans started: a rollout's spans are kept only if keeping never stopped since it was created. */
  private keepGeneration = 0;
  /** The rollouts of `spans` whose span objects are kept, oldest first, and those spans' stored bytes in all. */
  private readonly keeping = new Map<string, RolloutSpans>();
  private keptBytes = 0;
  /** Whether spans are kept now (a reader asked for them: `StorageBackend.keepSpans`). */
  private keepingSpans = false;

  /** `maxKeptBytes`: the budget of the spans kept, by their stored size. */
  constructor(private readonly maxKeptBytes = 8 << 20) {}

  /** What `latestAttempt` knows: the latest attempt's key, null when there is none, undefined when it does not know. */
  latestOf(rolloutId: string): LatestAttempt | null | undefined {
    return this.latest.get(rolloutId);
  }

  /** A rollout just inserted: it has no attempts and no spans (kept from now on, while spans are kept). */
  rolloutCreated(rolloutId: string): void {
    this.setLatest(rolloutId, null);
    this.forgetSpansOf(rolloutId);
    this.created.set(rolloutId, this.keepingSpans ? this.keepGeneration : -1);
    if (this.created.size > maxCreatedRollouts) this.created.delete(this.created.keys().next().value as string);
  }

  /** What the cache knows of a rollout's spans: undefined when it does not know them all. */
  spansOf(rolloutId: string): RolloutSpans | undefined {
    return this.spans.get(rolloutId) ?? this.firstAsked(rolloutId);
  }

  /** A rollout this connection created, asked about for the first time: its entry, with no spans. */
  private firstAsked(rolloutId: string): RolloutSpans | undefined {
    const generation = this.created.get(rolloutId);
    if (generation === undefined) return undefined;
    this.created.delete(rolloutId);
    const spans: RolloutSpans = { counter: 0, stored: new Map(), kept: undefined, keptBytes: 0 };
    this.spans.set(rolloutId, spans);
    if (this.keepingSpans && generation === this.keepGeneration) {
      spans.kept = [];
      this.keeping.set(rolloutId, spans);
    }
    if (this.spans.size > maxSpanRollouts) this.forgetSpansOf(this.spans.keys().next().value as string);
    return spans;
  }

  /** Starts or stops keeping spans; stopped, it drops those it kept. */
  keepSpans(on: boolean): void {
    if (on && !this.keepingSpans) this.keepGeneration++;
    this.keepingSpans = on;
    if (!on) for (const [rolloutId, spans] of this.keeping) this.dropKept(rolloutId, spans);
  }

  /** Whether a span of the rollout stored now would be kept (see {@link spanStored}). */
  keepingSpansOf(spans: RolloutSpans): boolean {
    return this.keepingSpans && spans.kept !== undefined;
  }

  /**
   * A span was stored as `bytes` under `sequenceId`: the rollout's spans are still known while they are few, and kept
   * while spans are kept and the kept spans of all rollouts are under their budget (the oldest rollouts' are dropped
   * first). `keep`: the span, which nothing may change from now on; undefined when it cannot be kept (the rollout's
   * are then dropped, as when spans are not kept now).
   */
  spanStored(spans: RolloutSpans, rolloutId: string, key: string, sequenceId: number, keep: Span | undefined, bytes: number): void {
    spans.stored.set(key, sequenceId);
    if (spans.stored.size > maxSpansPerRollout) this.forgetSpansOf(rolloutId);
    else if (!spans.kept) return;
    else if (!keep || !this.keepingSpans) this.dropKept(rolloutId, spans);
    else {
      spans.kept.push(keep);
      spans.keptBytes += bytes;
      this.keptBytes += bytes;
      if (this.keptBytes <= this.maxKeptBytes) return;
      for (const [oldest, kept] of this.keeping) {
        this.dropKept(oldest, kept);
        if (this.keptBytes <= this.maxKeptBytes) break;
      }
    }
  }

  /**
   * Every stored span of a rollout, in the order they were stored; undefined unless the cache keeps them all. They
   * are what was stored (most of them `ReceivedSpan`s): the caller hands out frozen plain spans made from them.
   */
  keptSpansOf(rolloutId: string): readonly Span[] | undefined {
    return this.spansOf(rolloutId)?.kept;
  }

  /** Forgets a rollout's spans (an undone call stored some, or the database knew one the cache did not). */
  forgetSpansOf(rolloutId: string): void {
    this.created.delete(rolloutId);
    const spans = this.spans.get(rolloutId);
    if (!spans) return;
    this.spans.delete(rolloutId);
    this.dropKept(rolloutId, spans);
  }

  private dropKept(rolloutId: string, spans: RolloutSpans): void {
    if (!this.keeping.delete(rolloutId)) return;
    this.keptBytes -= spans.keptBytes;
    spans.kept = undefined;
    spans.keptBytes = 0;
  }

  /** `attempt` was read as its rollout's latest (SQLite's order: sequence id, then attempt id, both descending). */
  latestRead(attempt: Attempt): void {
    this.setLatest(attempt.rolloutId, { attemptId: attempt.attemptId, sequenceId: attempt.sequenceId });
  }

  /** `attempt` was written: it becomes the latest when it comes after the known one; on a tie SQLite decides. */
  attemptWritten(attempt: Attempt): void {
    const known = this.latest.get(attempt.rolloutId);
    if (known === undefined) return;
    const mine = { attemptId: attempt.attemptId, sequenceId: attempt.sequenceId };
    const sameAttempt = known !== null && attempt.attemptId === known.attemptId;
    if (known === null || attempt.sequenceId > known.sequenceId || (sameAttempt && attempt.sequenceId === known.sequenceId)) {
      this.setLatest(attempt.rolloutId, mine);
    } else if (sameAttempt || attempt.sequenceId === known.sequenceId) {
      // The latest attempt moved back, or another one ties with it: SQLite knows which is latest now.
      this.latest.delete(attempt.rolloutId);
    }
  }

  /** Forgets which attempt is a rollout's latest (an undone call wrote the rollout or its attempts). */
  forgetLatestOf(rolloutId: string): void {
    this.latest.delete(rolloutId);
  }

  clear(): void {
    this.rollouts.clear();
    this.attempts.clear();
    this.workers.clear();
    this.latest.clear();
    this.spans.clear();
    this.created.clear();
    this.keeping.clear();
    this.keptBytes = 0;
  }

  private setLatest(rolloutId: string, value: LatestAttempt | null): void {
    this.latest.delete(rolloutId);
    this.latest.set(rolloutId, value);
    if (this.latest.size > maxLatest) this.latest.delete(this.latest.keys().next().value as string);
  }
}

export interface LatestAttempt {
  attemptId: string;
  sequenceId: number;
}

/** Rollouts whose latest attempt the cache remembers (an entry is a few dozen bytes). */
const maxLatest = 1 << 16;

/**
 * A rollout's spans, known from its creation on this connection: its span counter's value and the sequence id of each
 * stored span by `attemptId\0spanId`. A span batch then needs no statement to find which of its spans are stored,
 * nor to read its counter. While a reader in this process asked for them (a following triplet stream:
 * `StorageBackend.keepSpans`) and they fit the budget, the spans themselves are kept too, in the order they were
 * stored: that stream reads each finished rollout's spans once, soon after they came, and read from the file they cost
 * a query as well as their decoding. Most are `ReceivedSpan`s, which hold the bytes they came in and are decoded when
 * read.
 */
export interface RolloutSpans {
  counter: number;
  stored: Map<string, number>;
  /**
   * Undefined when the rollout was created while spans were not kept, and once dropped (the budget, a span that could
   * not be kept, the reader gone): queries then read the file.
   */
  kept: Span[] | undefined;
  keptBytes: number;
}

/**
 * Rollouts whose spans the cache follows (those it was first asked about last: their spans began to come, so they
 * run or just finished), the most spans it follows for one of them, and the rollouts created and not asked about yet
 * that it remembers (the newest).
 */
const maxSpanRollouts = 1 << 13;
const maxSpansPerRollout = 1 << 10;
const maxCreatedRollouts = 1 << 16;

/** Encoded rows by key, the oldest written dropped first once their bytes pass the budget. */
export class BoundedRows {
  private readonly rows = new Map<string, CachedRow>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string): Uint8Array | undefined {
    return this.rows.get(key)?.data;
  }

  /** The row's column values as `set` was given them: undefined when unknown (the row was read back as its bytes). */
  columnsOf(key: string): readonly unknown[] | undefined {
    return this.rows.get(key)?.columns;
  }

  /** The cached row, else what `load` reads from the database (kept when found). */
  read(key: string, load: () => Uint8Array | undefined): Uint8Array | undefined {
    const cached = this.rows.get(key);
    if (cached) return cached.data;
    const data = load();
    if (data) this.set(key, data);
    return data;
  }

  set(key: string, data: Uint8Array, columns?: readonly unknown[]): void {
    this.delete(key);
    // A huge row (a rollout with a large input) would push out hundreds of small ones: it is read from SQLite.
    if (data.byteLength > this.maxBytes >> 8) return;
    this.rows.set(key, { data, columns });
    this.bytes += data.byteLength;
    for (const [oldest, row] of this.rows) {
      if (this.bytes <= this.maxBytes) break;
      this.rows.delete(oldest);
      this.bytes -= row.data.byteLength;
    }
  }

  delete(key: string): void {
    const row = this.rows.get(key);
    if (!row) return;
    this.rows.delete(key);
    this.bytes -= row.data.byteLength;
  }

  clear(): void {
    this.rows.clear();
    this.bytes = 0;
  }
}

interface CachedRow {
  data: Uint8Array;
  columns: readonly unknown[] | undefined;
}
