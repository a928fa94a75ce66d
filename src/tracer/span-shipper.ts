import { Code } from "@connectrpc/connect";
import { writeSpans } from "../client/span-writer.js";
import type { Logger } from "../core/logger.js";
import type { AttemptStatus, Span } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";

/** Options of {@link createSpanShipper}. */
export interface SpanShipperOptions {
  store: StoreApi;
  /** Spans per AddSpans call. Default 256. */
  batchSize?: number;
  /** Longest a span waits for its batch to fill. Default 100 ms. */
  lingerMs?: number;
  /** Spans held at most while the store is slow; beyond it new spans are dropped and counted. Default 20,000. */
  maxQueued?: number;
  /** AddSpans calls in flight at once. Default 4. */
  maxInFlight?: number;
  /**
   * How long a batch is retried while the store is unreachable or fails transiently (a network cut, a restarting
   * server) before its spans are dropped and counted. Default 5 min. Meanwhile new spans wait, up to `maxQueued`.
   */
  retryForMs?: number;
  /** Tries per batch before its spans are dropped and counted. Default: unlimited (`retryForMs` bounds them). */
  maxTries?: number;
  /** First retry delay; it doubles per try (with jitter, at most 5 s). Default 100 ms. */
  retryBaseMs?: number;
  /** Deadline of one AddSpans call. Default 10 s. */
  callTimeoutMs?: number;
  /** Called with the attempt status each acknowledgement reports (a runner stops cancelled attempts). */
  onAttemptStatus?(rolloutId: string, attemptId: string, status: AttemptStatus): void;
  logger?: Logger;
}

/** Counters of a shipper. */
export interface SpanShipperStats {
  queued: number;
  inFlight: number;
  shipped: number;
  /** Spans the store had already stored (a retried batch): acknowledged, not stored again. */
  duplicates: number;
  dropped: number;
  retries: number;
}

/**
 * Ships finished spans to the store in batches, off the agent's path. Retries are safe because AddSpans is idempotent
 * by span id: a batch whose answer was lost is sent again and the store acknowledges the copies as duplicates. While
 * the store cannot be reached, batches are retried (for up to `retryForMs`) and new spans wait, so that an outage loses
 * nothing. Memory is bounded: past `maxQueued` new spans are dropped, counted per attempt and overall, and logged.
 */
export interface SpanShipper {
  enqueue(spans: readonly Span[]): void;
  /**
   * Ends an attempt's part in the shipper: ships its last spans and the ones still queued at once, waits until the
   * store has acknowledged them all (or they were dropped), and reports how many of its spans were dropped. After it
   * resolves, the attempt's status can be reported: no span of the attempt reaches the store after it.
   */
  settle(rolloutId: string, attemptId: string, last?: readonly Span[]): Promise<{ dropped: number }>;
  /**
   * As `settle`, except that the attempt's queued spans and its last ones, when they fit in one batch, are handed
   * back (in `spans`) rather than shipped, for the caller to store with the attempt's final update: one call to the
   * store rather than two. Resolves once the attempt's batches already in flight are acknowledged or dropped.
   */
  handOver(rolloutId: string, attemptId: string, last?: readonly Span[]): Promise<{ dropped: number; spans: Span[] }>;
  /** When a batch of the attempt was last acknowledged (epoch ms), if ever. */
  lastShippedMs(rolloutId: string, attemptId: string): number | undefined;
  /** More than half of `maxQueued` is waiting: a runner should take no new work. */
  readonly congested: boolean;
  whenUncongested(): Promise<void>;
  stats(): SpanShipperStats;
  /** Ships everything queued and waits for it. */
  flush(): Promise<void>;
}

interface Account {
  inFlight: Set<Promise<void>>;
  dropped: number;
  lastShippedMs?: number;
}

const keyOf = (s: { rolloutId: string; attemptId: string }) => `${s.rolloutId}\0${s.attemptId}`;

/** Creates a span shipper over `options.store`. */
export function createSpanShipper(options: SpanShipperOptions): SpanShipper {
  const { store } = options;
  const batchSize = options.batchSize ?? 256;
  const lingerMs = options.lingerMs ?? 100;
  const maxQueued = options.maxQueued ?? 20_000;
  const maxInFlight = options.maxInFlight ?? 4;
  const maxTries = options.maxTries ?? Number.POSITIVE_INFINITY;
  const retryForMs = options.retryForMs ?? 300_000;
  const retryBaseMs = options.retryBaseMs ?? 100;
  const callTimeoutMs = options.callTimeoutMs ?? 10_000;
  const stats: SpanShipperStats = { queued: 0, inFlight: 0, shipped: 0, duplicates: 0, dropped: 0, retries: 0 };
  let queue: Span[] = [];
  const accounts = new Map<string, Account>();
  const inFlightAll = new Set<Promise<void>>();
  let linger: NodeJS.Timeout | undefined;
  let uncongested: (() => void)[] = [];

  const account = (key: string) => {
    let acc = accounts.get(key);
    if (!acc) {
      acc = { inFlight: new Set(), dropped: 0 };
      accounts.set(key, acc);
    }
    return acc;
  };
  const drop = (spans: readonly Span[], reason: string) => {
    const perAttempt = new Map<string, number>();
    for (const span of spans) perAttempt.set(keyOf(span), (perAttempt.get(keyOf(span)) ?? 0) + 1);
    for (const [key, n] of perAttempt) account(key).dropped += n;
    stats.dropped += spans.length;
    const [rolloutId, attemptId] = [...perAttempt.keys()][0]?.split("\0") ?? [];
    options.logger?.warn(
      `dropped ${spans.length} span(s) (first of ${rolloutId} ${attemptId}): ${reason}; ${stats.dropped} dropped so far`,
    );
  };

  const ship = async (batch: Span[]): Promise<void> => {
    const { acks, failed } = await writeSpans(store, batch, {
      callTimeoutMs,
      retry: { tries: maxTries, forMs: retryForMs, baseMs: retryBaseMs, unref: true, onRetry: () => void stats.retries++ },
    });
    stats.shipped += acks.length;
    const now = Date.now();
    const seen = new Set<string>();
    for (const ack of acks) {
      if (ack.duplicate) stats.duplicates++;
      const key = keyOf(ack);
      if (seen.has(key)) continue;
      seen.add(key);
      account(key).lastShippedMs = now;
      options.onAttemptStatus?.(ack.rolloutId, ack.attemptId, ack.attemptStatus);
    }
    for (const { spans, error, refused, tries } of failed) {
      const why = `${Code[error.code]}: ${error.rawMessage}`;
      drop(spans, refused ? `the store refused them (${why})` : `gave up after ${tries} tries (${why})`);
    }
  };

  const send = (batch: Span[]) => {
    const accs = new Set(batch.map((span) => account(keyOf(span))));
    stats.inFlight++;
    const promise: Promise<void> = ship(batch).finally(() => {
      stats.inFlight--;
      inFlightAll.delete(promise);
      for (const acc of accs) acc.inFlight.delete(promise);
      pump(false);
    });
    inFlightAll.add(promise);
    for (const acc of accs) acc.inFlight.add(promise);
  };

  const pump = (force: boolean) => {
    while (stats.inFlight < maxInFlight && queue.length > 0) {
      if (queue.length < batchSize && !force) {
        if (linger === undefined) {
          linger = setTimeout(() => {
            linger = undefined;
            pump(true);
          }, lingerMs).unref();
        }
        break;
      }
      send(queue.splice(0, batchSize));
    }
    stats.queued = queue.length;
    if (queue.length <= maxQueued / 2 && uncongested.length > 0) {
      for (const resolve of uncongested) resolve();
      uncongested = [];
    }
  };

  const end = async (rolloutId: string, attemptId: string, last: readonly Span[], handOver: boolean) => {
    const key = keyOf({ rolloutId, attemptId });
    // The attempt's queued spans go now, whatever the linger, with its last ones (which bypass `maxQueued`: the
    // attempt is ending, so they are the last it adds).
    const mine: Span[] = [];
    const others: Span[] = [];
    for (const span of queue) (keyOf(span) === key ? mine : others).push(span);
    queue = others;
    stats.queued = queue.length;
    mine.push(...last);
    const kept = handOver && mine.length <= batchSize ? mine : [];
    if (kept.length === 0) for (let i = 0; i < mine.length; i += batchSize) send(mine.slice(i, i + batchSize));
    const acc = accounts.get(key);
    if (!acc) return { dropped: 0, spans: kept };
    await Promise.all([...acc.inFlight]);
    accounts.delete(key);
    return { dropped: acc.dropped, spans: kept };
  };

  return {
    enqueue(spans) {
      const refused: Span[] = [];
      for (const span of spans) {
        if (queue.length >= maxQueued) refused.push(span);
        else queue.push(span);
      }
      if (refused.length > 0) drop(refused, `more than ${maxQueued} spans are waiting for a slow store`);
      pump(false);
    },
    settle: (rolloutId, attemptId, last = []) => end(rolloutId, attemptId, last, false).then(({ dropped }) => ({ dropped })),
    handOver: (rolloutId, attemptId, last = []) => end(rolloutId, attemptId, last, true),
    lastShippedMs: (rolloutId, attemptId) => accounts.get(keyOf({ rolloutId, attemptId }))?.lastShippedMs,
    get congested() {
      return queue.length > maxQueued / 2;
    },
    whenUncongested() {
      if (queue.length <= maxQueued / 2) return Promise.resolve();
      return new Promise((resolve) => uncongested.push(resolve));
    },
    stats: () => ({ ...stats }),
    async flush() {
      while (queue.length > 0 || inFlightAll.size > 0) {
        pump(true);
        await Promise.race([...inFlightAll]);
      }
    },
  };
}
