import { Code, ConnectError } from "@connectrpc/connect";
import type { RolloutTriplets, StreamTripletsRequest, StreamTripletsResponse } from "../gen/agl/v1/triplets_pb.js";
import { type Rollout, RolloutMode, RolloutStatus, type Span } from "../gen/agl/v1/types_pb.js";
import { sleep } from "../core/retry.js";
import type { StoreApi } from "../store/store-api.js";
import type { StoreEvent } from "../store/backend.js";
import { openCursor } from "./cursor.js";
import { adapterOptions, rolloutTriplets } from "./rollout-triplets.js";

/** Options of {@link streamTriplets}. */
export interface StreamTripletsOptions {
  /** How often a `follow` stream looks for newly finished rollouts (default 250 ms). */
  pollIntervalMs?: number;
  /** Rollouts read per store query (default 500). */
  pageSize?: number;
  /** Messages built ahead of the consumer, so store reads overlap with sending (default 2). */
  prefetch?: number;
  /**
   * The store's committed events, where the stream runs in the store's process (`StorageBackend.subscribe`). A
   * `follow` stream then reads again only the rollouts that finished and those created since its last read, once an
   * event says one finished, rather than every unfinished rollout each `pollIntervalMs`: a step of n rollouts costs
   * O(n) reads, not O(n) per poll.
   */
  events?: (listener: (event: StoreEvent) => void) => () => void;
  /** With `events`: a full pass this often all the same, for finishes no event of this process reports (default 5,000 ms). */
  fullPassMs?: number;
  /**
   * Where the stream runs in the store's process: asks the backend to keep the spans it stores while a `follow` stream
   * runs (`StorageBackend.keepSpans`), so the triplets of rollouts that finish meanwhile need not read them back.
   */
  keepSpans?: () => () => void;
  /**
   * Where the stream runs in the store's process: the spans of several attempts (each attempt's in sequence order)
   * in one read of the store, rather than one `querySpans` call each.
   */
  spansOf?: (attempts: AttemptRef[]) => Promise<Span[][]>;
}

/** One attempt of one rollout. */
export interface AttemptRef {
  rolloutId: string;
  attemptId: string;
}

/** Finished rollouts whose spans `spansOf` reads at once: bounds the spans held ahead of sending, and the read. */
const spanReadBatch = 32;

const finished = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);

/** A message of the stream: a plain object, as `create()` would make it without walking the schema. */
const response = (fields: Omit<StreamTripletsResponse, "$typeName">): StreamTripletsResponse => ({
  $typeName: "agl.v1.StreamTripletsResponse",
  ...fields,
});

/** A key of the filters that decide which rollouts a cursor covers. */
function filterKey(req: StreamTripletsRequest): string {
  return JSON.stringify([
    [...req.rolloutIds].sort(),
    req.groupId,
    req.rolloutMode,
    [...req.statusIn].sort(),
    req.resourcesId,
    req.resourcesVersion,
  ]);
}

/**
 * The triplet stream over any `StoreApi`: walks the matching rollouts in creation order and sends each one once it
 * has finished, with a cursor after every message. Rollouts that finish out of order are sent when found, and the
 * cursor remembers them, so a resumed stream neither repeats nor skips one. Messages are built as the consumer takes
 * them, at most `prefetch` ahead (the server pulls the generator only after the previous message was written). With `follow`, the
 * stream keeps polling for newly finished rollouts; a `caught_up` message marks the end of each burst.
 */
export async function* streamTriplets(
  store: StoreApi,
  req: StreamTripletsRequest,
  signal?: AbortSignal,
  options: StreamTripletsOptions = {},
): AsyncGenerator<StreamTripletsResponse> {
  for (const status of req.statusIn) {
    if (!finished.has(status)) {
      throw new ConnectError(
        `status_in: ${RolloutStatus[status] ?? status} is not a finished status (succeeded, failed, cancelled)`,
        Code.InvalidArgument,
      );
    }
  }
  const cursor = openCursor(req.cursor, filterKey(req));
  const adapter = adapterOptions(req.options);
  const pageSize = options.pageSize ?? 500;
  const statuses = new Set(req.statusIn);
  const resources = { resourcesId: req.resourcesId, resourcesVersion: req.resourcesVersion };
  const wanted = (r: Rollout) =>
    (req.rolloutMode === RolloutMode.UNSPECIFIED || r.mode === req.rolloutMode) && (statuses.size === 0 || statuses.has(r.status));
  const prefetch = options.prefetch ?? 2;
  let announce = true;
  // Rollouts taken in creation order; their messages are built up to `prefetch` ahead and sent in order.
  const queue: { position: number; build: Promise<RolloutTriplets> | undefined }[] = [];
  async function* send(keep: number) {
    while (queue.length > keep) {
      const { position, build } = queue.shift() as (typeof queue)[number];
      const message = build && (await build);
      cursor.complete(position);
      if (!message) continue;
      announce = true;
      yield response({ rollout: message, cursor: cursor.current(), caughtUp: false });
    }
  }
  // Unfinished rollouts a pass found, by id, with their positions: with events, only those an event names are read again.
  const unfinished = new Map<string, number>();
  let scanned = 0; // positions below it were read at least once
  const take = async function* (rollout: Rollout, position: number, spans: Span[] | undefined) {
    scanned = Math.max(scanned, position + 1);
    if (!cursor.pending(position)) return;
    if (!finished.has(rollout.status)) {
      unfinished.set(rollout.rolloutId, position);
      return;
    }
    unfinished.delete(rollout.rolloutId);
    const build = wanted(rollout) ? rolloutTriplets(store, rollout, "latest", adapter, resources, signal, spans) : undefined;
    // Awaited in order later; until then a failure must not count as unhandled.
    build?.catch(() => {});
    queue.push({ position, build });
    return yield* send(prefetch);
  };
  // Takes rollouts (with their positions, in order), reading the spans of those to be sent a batch at a time where
  // the store offers that (`spansOf`); otherwise each message's build reads its own.
  const takeAll = async function* (found: ReadonlyArray<readonly [Rollout, number]>) {
    const spansOf = options.spansOf;
    for (let i = 0; i < found.length; i += spanReadBatch) {
      const batch = found.slice(i, i + spanReadBatch);
      const due = batch.flatMap(([r, p]) => {
        const attemptId = r.latestAttempt?.attemptId;
        return spansOf && attemptId && cursor.pending(p) && finished.has(r.status) && wanted(r)
          ? [{ rolloutId: r.rolloutId, attemptId }]
          : [];
      });
      const lists = spansOf && due.length > 0 ? await spansOf(due) : [];
      const spans = new Map(due.map((a, k) => [a.rolloutId, lists[k]]));
      for (const [rollout, position] of batch) yield* take(rollout, position, spans.get(rollout.rolloutId));
    }
  };
  // Reads the matching rollouts in creation order from `offset` to the end.
  const scan = async function* (offset: number) {
    for (;;) {
      const page = await store.queryRollouts(
        { rolloutIdIn: req.rolloutIds, groupId: req.groupId, page: { offset, limit: pageSize } },
        signal ? { signal } : {},
      );
      yield* takeAll(page.rollouts.map((rollout, i) => [rollout, offset + i] as const));
      if (page.rollouts.length < pageSize) return;
      offset += pageSize;
    }
  };
  // Reads again the unfinished rollouts an event said finished, in creation order.
  const reread = async function* (known: string[]) {
    for (let i = 0; i < known.length; i += pageSize) {
      const page = await store.queryRollouts({ rolloutIdIn: known.slice(i, i + pageSize) }, signal ? { signal } : {});
      yield* takeAll(page.rollouts.map((r) => [r, unfinished.get(r.rolloutId) as number] as const).sort((a, b) => a[1] - b[1]));
    }
  };
  let named = new Set<string>();
  let wake: (() => void) | undefined;
  const stopListening = req.follow
    ? options.events?.((event) => {
        if (event.kind !== "finished") return;
        for (const id of event.rolloutIds) named.add(id);
        wake?.();
      })
    : undefined;
  const stopKeeping = req.follow ? options.keepSpans?.() : undefined;
  const fullPassMs = options.fullPassMs ?? 5_000;
  let lastFullPass = Number.NEGATIVE_INFINITY;
  try {
    while (!signal?.aborted) {
      if (!stopListening || performance.now() - lastFullPass >= fullPassMs) {
        lastFullPass = performance.now();
        named = new Set();
        unfinished.clear();
        yield* scan(cursor.watermark);
      } else {
        const ids = [...named];
        named = new Set();
        const known = ids.filter((id) => unfinished.has(id));
        yield* reread(known);
        // A rollout created since the last read finished too (or one of rollouts this stream does not cover).
        if (known.length < ids.length) yield* scan(Math.max(scanned, cursor.watermark));
      }
      yield* send(0);
      if (announce) {
        announce = false;
        yield response({ cursor: cursor.current(), caughtUp: true });
      }
      if (!req.follow) return;
      await sleep(options.pollIntervalMs ?? 250, { signal });
      if (stopListening && named.size === 0) {
        // Nothing finished since the pass: wait for an event, or for the next full pass.
        await sleep(fullPassMs - (performance.now() - lastFullPass), { signal, wake: (done) => (wake = done) });
        wake = undefined;
      }
    }
  } finally {
    stopListening?.();
    stopKeeping?.();
  }
}
