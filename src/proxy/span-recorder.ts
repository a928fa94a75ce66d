import type { MessageInitShape } from "@bufbuild/protobuf";
import { type WriteSpansResult, writeSpans } from "../client/span-writer.js";
import type { AttemptDescription, ExpectSpansRequestSchema } from "../gen/agl/v1/store_pb.js";
import { AttemptStatus, type Span } from "../gen/agl/v1/types_pb.js";
import type { PendingWrites } from "../store/pending-writes.js";
import type { StoreApi } from "../store/store-api.js";
import { handOver } from "../store/span-wire.js";
import { type CallRecord, callSpan } from "./call-span.js";
import type { CallScope, ScopeChecker } from "./scope-check.js";
import { DeadlineTimer } from "../core/deadline-timer.js";
import { sleep } from "../core/retry.js";
import type { Logger } from "../core/logger.js";

/** Counters of what the recorder did. */
export interface RecorderStats {
  spansRecorded: number;
  spanWriteErrors: number;
}

/** Writes one span per call to the store; never throws (a store failure is logged and counted, the call still served). */
export interface SpanRecorder {
  /**
   * Stores the call's span; with pending writes, registers the write there before returning. `waiting`: the answer
   * waits for this write, so it goes at once; otherwise it may wait up to `batchLingerMs` to share a call with others.
   */
  record(call: CallRecord, waiting: boolean): Promise<void>;
  stats(): RecorderStats;
  /** Sends now what waits for a batch, and the questions about attempts waiting for the turn to end (as the proxy closes). */
  flush(): void;
  /**
   * Sends a span promise with the next batch (`AddSpans.expect`): at once when spans wait for one, otherwise with the
   * batch it starts, which lingers like any other. `outcome` resolves once the store answered; `send()` sends it now
   * if it is still waiting (its answer is about to end).
   */
  carry(request: SpanPromise): { outcome: Promise<CarriedOutcome>; send(): void };
  /**
   * Asks the store what the proxy checks of an attempt before serving its first call (`describe_attempt`), with the
   * questions asked in the same turn of the event loop and no spans (a scope the store refuses must not take other
   * calls' spans down with it): null when the store answered without it (it predates the field), undefined when the
   * call failed. `promise`: that call's span promise, in the same entry (the store takes it once it found the rollout).
   */
  describe(scope: CallScope, promise?: Carried): Promise<AttemptDescription | null | undefined>;
  /**
   * Releases a hold (`release`: the `expect` entry that does) once the spans recorded so far are stored: the open
   * batch goes now, and the release follows once every batch sent before it was answered.
   */
  release(release: SpanPromise): Promise<void>;
}

/**
 * What came of a carried promise: the store holds it; it answered that it does not (as `ExpectSpans` would have
 * refused it); it answered without reading `expect` (a store older than it); it took a hold as a promise of a span
 * with the hold's id (a store that predates holds); or the call failed.
 */
export type CarriedOutcome = "held" | "refused" | "unread" | "held as a promise" | "failed";

/** A span promise, as `ExpectSpans` takes it. */
export type SpanPromise = MessageInitShape<typeof ExpectSpansRequestSchema>;

/** Options of {@link createSpanRecorder}. */
export interface SpanRecorderOptions {
  store: StoreApi;
  scopes: ScopeChecker;
  /** The in-process store's pending writes, where each span write is registered as it starts. */
  pendingWrites?: PendingWrites;
  /** Told when a span write failed, so a store waiting for that span stops waiting. */
  onLost?: (scope: CallScope, spanId: string) => void;
  /**
   * Spans nobody waits for are gathered this long (default 0: each goes at once) into one `AddSpans`: fewer calls to
   * a store in another process.
   */
  batchLingerMs?: number;
  /** Most spans per batch (default 64). */
  maxBatch?: number;
  /** Longest wait for the store per write (default 5,000 ms). */
  timeoutMs?: number;
  logger: Logger;
}

type Scoped = CallRecord & { scope: CallScope };
/** A promise sent with a batch, and what to tell once the store answered. */
export type Carried = { request: SpanPromise; resolve(outcome: CarriedOutcome, attempt: AttemptDescription | null | undefined): void };
type Batch = {
  calls: Scoped[];
  /** The calls' spans, built as each joined: right after its answer, not when the next call starts and sends them. */
  spans: Span[];
  expect: Carried[];
  written: Promise<void>;
  send(): void;
  /** When it goes if nothing sends it before (epoch ms). */
  lingersUntil: number;
};

/** Tries of a hold's release: 100 ms after the first, then twice as long each time, ~13 s in all. */
const releaseTries = 8;

/** Creates a {@link SpanRecorder}. */
export function createSpanRecorder(options: SpanRecorderOptions): SpanRecorder {
  const stats: RecorderStats = { spansRecorded: 0, spanWriteErrors: 0 };
  const timeoutMs = options.timeoutMs ?? 5_000;
  const lingerMs = options.batchLingerMs ?? 0;
  const maxBatch = options.maxBatch ?? 64;
  /** Writes in progress: a hold's release waits for them. */
  const writing = new Set<Promise<void>>();
  // Nothing in the proxy changes a call's span once it is built: the store may keep its objects without copying them.
  const spanOf = (call: Scoped) => handOver(callSpan(call));
  const write = (calls: Scoped[], expect: Carried[] = [], spans = calls.map(spanOf)) => {
    const written = writeAndResolve(calls, expect, spans);
    writing.add(written);
    void written.finally(() => writing.delete(written));
    return written;
  };
  const writeAndResolve = async (calls: Scoped[], expect: Carried[], spans: Span[]) => {
    let answer: Pick<WriteSpansResult, "expectHeld" | "expectAttempts" | "holds"> | undefined;
    try {
      answer = await writeCalls(calls, spans, expect);
    } finally {
      const held = answer?.expectHeld;
      for (const [i, carried] of expect.entries()) {
        const outcome: CarriedOutcome =
          held === undefined
            ? "failed"
            : held.length === 0
              ? "unread"
              : !held[i]
                ? "refused"
                : carried.request.hold && !answer?.holds
                  ? "held as a promise"
                  : "held";
        carried.resolve(outcome, held === undefined ? undefined : (answer?.expectAttempts?.[i] ?? null));
      }
    }
  };
  const writeCalls = async (calls: Scoped[], spans: Span[], expect: Carried[]) => {
    const bySpan = new Map(calls.map((call) => [call.spanId, call]));
    const { acks, failed, ...answer } = await writeSpans(options.store, spans, {
      callTimeoutMs: timeoutMs,
      expect: expect.map((carried) => carried.request),
    });
    stats.spansRecorded += acks.length;
    for (const ack of acks) {
      const scope = bySpan.get(ack.spanId)?.scope;
      if (scope && ack.attemptStatus === AttemptStatus.CANCELLED) options.scopes.markCancelled(scope);
    }
    for (const { spans, error } of failed) {
      stats.spanWriteErrors += spans.length;
      const lost = spans.flatMap((span) => bySpan.get(span.spanId) ?? []);
      const rollouts = [...new Set(lost.map((c) => c.scope.rolloutId))].join(", ");
      options.logger.error(
        `could not store the span of ${lost.length === 1 ? "a call" : `${lost.length} calls`} of rollout ${rollouts}: ` +
          `${error.message}`,
      );
      for (const call of lost) options.onLost?.(call.scope, call.spanId);
    }
    return answer;
  };

  /**
   * Describes asked for in this turn of the event loop: they go together once it ends. Attempts start in waves (a
   * runner claims several at once), and their first calls reach the proxy together: `make demo`'s store got one
   * message and one read a rollout, where it now gets about one for every seven.
   */
  let describing: Carried[] = [];
  const sendDescribes = () => {
    const entries = describing;
    describing = [];
    if (entries.length === 0) return;
    if (entries.length === 1) return void write([], entries);
    // A store that refuses one entry (a malformed scope) fails the whole batch, having changed nothing: each entry then
    // goes alone, as it did before they were gathered, so one bad scope costs the others a second try and nothing
    // more (a store out of reach fails each again, as it would have).
    void write(
      [],
      entries.map((entry) => ({
        request: entry.request,
        resolve: (outcome, attempt) => (outcome === "failed" ? void write([], [entry]) : entry.resolve(outcome, attempt)),
      })),
    );
  };

  let batch: Batch | undefined;
  const flush = () => {
    const full = batch;
    batch = undefined;
    full?.send();
  };
  // One timer for the batches' lingering, not one a batch (a call opens one or two): when it fires, the open batch
  // goes if its time is up, else the timer waits for it.
  const linger = new DeadlineTimer(
    (now) => {
      if (batch && batch.lingersUntil <= now) flush();
      return batch?.lingersUntil ?? Number.POSITIVE_INFINITY;
    },
    { keepAlive: true },
  );
  const open = (): Batch => {
    if (!batch) {
      let send!: () => void;
      const calls: Scoped[] = [];
      const spans: Span[] = [];
      const expect: Carried[] = [];
      const written = new Promise<void>((resolve) => (send = () => void write(calls, expect, spans).then(resolve)));
      batch = { calls, spans, expect, written, send, lingersUntil: Date.now() + lingerMs };
      linger.add(batch.lingersUntil);
    }
    return batch;
  };
  const join = (call: Scoped): Promise<void> => {
    const span = spanOf(call);
    const joined = open();
    joined.calls.push(call);
    joined.spans.push(span);
    if (joined.calls.length >= maxBatch) flush();
    return joined.written;
  };

  return {
    record(call, waiting) {
      if (!call.scope) return Promise.resolve();
      const scoped = call as Scoped;
      const written = waiting || lingerMs <= 0 ? write([scoped]) : join(scoped);
      options.pendingWrites?.add(scoped.scope.rolloutId, written);
      return written;
    },
    stats: () => ({ ...stats }),
    flush() {
      flush();
      sendDescribes();
      linger.stop(); // nothing lingers: a process that closes its proxy is not held by the timer
    },
    carry(request) {
      const joined = open();
      let resolve!: (outcome: CarriedOutcome) => void;
      const outcome = new Promise<CarriedOutcome>((r) => (resolve = r));
      joined.expect.push({ request, resolve });
      // A call that starts ends the wait of the spans before it: they go now, and the promise with them.
      if (joined.calls.length > 0 || joined.expect.length >= maxBatch) flush();
      return {
        outcome,
        send: () => {
          if (batch === joined) flush();
        },
      };
    },
    describe(scope, promise) {
      const request = { ...promise?.request, rolloutId: scope.rolloutId, attemptId: scope.attemptId, describeAttempt: true };
      return new Promise((resolve) => {
        const answered: Carried["resolve"] = (outcome, attempt) => {
          promise?.resolve(outcome, attempt);
          resolve(attempt);
        };
        if (describing.push({ request, resolve: answered }) === 1) setImmediate(sendDescribes);
        else if (describing.length >= maxBatch) sendDescribes();
      });
    },
    async release(request) {
      flush();
      // The store takes a batch's promises once its spans are stored, but the batches of one stream run side by side
      // there: the release goes once those before it are answered, not with them.
      await Promise.all(writing);
      // Tried again while the store is out of reach, for about as long as a hold lasts there.
      for (let tries = 1, backoffMs = 100; ; tries++, backoffMs *= 2) {
        const outcome = await new Promise<CarriedOutcome>((resolve) => void write([], [{ request, resolve }]));
        if (outcome !== "failed" || tries >= releaseTries) return;
        await sleep(backoffMs, { unref: true });
      }
    },
  };
}
