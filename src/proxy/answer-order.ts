import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import type { AttemptDescription } from "../gen/agl/v1/store_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { createBoundedMap } from "./bounded-map.js";
import type { CallScope } from "./scope-check.js";
import type { Logger } from "../core/logger.js";
import type { CarriedOutcome, SpanPromise, SpanRecorder } from "./span-recorder.js";
import type { SpanStreamEvents } from "./span-stream.js";

/**
 * Whether a call's answer may end before its span is stored. Either way an attempt cannot finish before its spans
 * land: answered first, the span is something the store already waits for.
 */
export interface AnswerOrder {
  /** Called as a scoped call starts; the call tells what it returns how it ends. */
  begin(scope: CallScope, spanId: string): CallOrder;
  /** The call checked with this span id will not start (refused, or it ended before): a promise made for it goes. */
  unused(scope: CallScope, spanId: string): void;
  /** A span answered first could not be stored: the store need not wait for it any longer. */
  lost(scope: CallScope, spanId: string): void;
}

/** One call's side of its {@link AnswerOrder}. */
export interface CallOrder {
  /**
   * Called when the answer is about to end: resolves true when the answer may end first (the store will hold the
   * attempt's finishing updates until the span lands).
   */
  answerFirst(): Promise<boolean>;
  /** The call's span was handed to the recorder: the call is over. */
  recorded(): void;
}

const nothing = () => {};
const always: CallOrder = { answerFirst: async () => true, recorded: nothing };
const never: CallOrder = { answerFirst: async () => false, recorded: nothing };

/**
 * The proxy runs in the store's process and registers each span write with the store's pending writes in the same
 * tick as it ends the answer: always answer first.
 */
export const inProcessOrder: AnswerOrder = { begin: () => always, unused: nothing, lost: nothing };

/** Store every span before its answer ends. */
export const spanFirstOrder: AnswerOrder = { begin: () => never, unused: nothing, lost: nothing };

/** How long a promise holds at the store; a call that outlives half of it promises its span again before answering. */
const promiseTtlMs = 10_000;
/** How long a hold lasts at the store. A call answers first on a hold taken at most half of that before. */
const holdTtlMs = 10_000;
/** New calls use a hold taken at most this long before; later ones take a new hold. */
const holdReuseMs = holdTtlMs / 4;

/** Attempts remembered to have made a call, at most (the oldest forgotten first). */
const maxStarted = 100_000;

const attemptKey = (scope: { rolloutId?: string; attemptId?: string }) => `${scope.rolloutId}\0${scope.attemptId}`;

/** A hold of one attempt's finishing updates, taken on the span stream; see {@link promisedOrder}. */
type Hold = {
  /** The `expect` entry that took it. */
  request: SpanPromise & { spanIds: [string] };
  /** `performance.now()` when it was sent. */
  sentAt: number;
  /** What came of it. */
  outcome: Promise<CarriedOutcome>;
  /** Sends the entry now if it still waits for a batch. */
  send(): void;
  /** Calls that may answer on it and have yet to hand over their span. */
  calls: number;
  /** The store asked for it back, or the stream it was taken on ended: it goes once its calls are over. */
  releasing: boolean;
  /** Calls may answer first on it: false once the stream it was taken on ended. */
  live: boolean;
  /** Its release was sent. */
  released: boolean;
};

/**
 * The store is another process. With a store that takes holds (`ExpectSpansRequest.hold`), an attempt's second call
 * takes one as it starts (its answer waits for it, as for a promise) and the attempt's later calls answer first on it
 * with no message of their own: their spans go in batches (the recorder's linger). The first call promises its span,
 * as below: an attempt of one call is served as it was before holds. When an update would finish the attempt, the
 * store asks for the hold back; the proxy sends the spans of the calls answered by then, waits for the calls still in
 * progress to hand over theirs, stores those, and releases the hold. A hold lasts `holdTtlMs` at the store; a call
 * answers first on one taken less than half of that before, and a new one is taken every `holdReuseMs`.
 *
 * Otherwise, promise each span as its call starts, so the promise travels while the engine works, and answer first
 * once the store holds it; the span is stored right after. The promise rides on the span recorder's next `AddSpans`
 * (`expect`): at once with the spans of calls that ended just before, otherwise with the next batch, sent at the
 * latest as the answer is about to end; so a proxy busy with calls makes about one call to the store per LLM call, not
 * two; an attempt's first call sends it in the entry that asks the store about the attempt (`describe`). Once a store
 * turned out not to take promises that way (it predates them), each goes alone (`ExpectSpans`, a small call the store
 * keeps in memory). A store that cannot hold promises (PostgreSQL, or a server without the method) is asked once: from
 * then on spans are stored first. Any other failure makes that call store its span first.
 */
export function promisedOrder(
  store: StoreApi,
  logger: Logger,
  recorder: Pick<SpanRecorder, "carry" | "release" | "describe">,
): AnswerOrder &
  SpanStreamEvents & {
    /** Releases every hold whose calls are over (as the proxy closes). */
    releaseAll(): Promise<void>;
    /** Describes an attempt on the span stream, with the span promise of the call that asks (`spanId`). */
    describe(scope: CallScope, spanId: string | undefined): Promise<AttemptDescription | null | undefined>;
  } {
  let refused = false;
  let carrying = true;
  let holding = true;
  /** The hold each attempt's new calls use. */
  const current = new Map<string, Hold>();
  /** Every hold not released, by id, oldest first. */
  const holds = new Map<string, Hold>();
  /** Attempts whose first call started. */
  const started = createBoundedMap<true>(maxStarted, maxStarted);
  /** By span id: the promises sent with an attempt's description (and when), for calls yet to start. */
  const described = new Map<string, { outcome: Promise<CarriedOutcome>; sentAt: number }>();
  const alone = async (request: SpanPromise): Promise<boolean> => {
    try {
      await store.expectSpans(request);
      return true;
    } catch (error) {
      const e = ConnectError.from(error);
      if ((e.code === Code.FailedPrecondition || e.code === Code.Unimplemented) && !refused) {
        refused = true;
        logger.info(`the store does not hold span promises (${e.rawMessage}); each span is stored before its answer ends`);
      }
      return false;
    }
  };
  const promiseOf = (scope: CallScope, spanId: string): SpanPromise => ({
    rolloutId: scope.rolloutId,
    attemptId: scope.attemptId,
    spanIds: [spanId],
    ttlMs: promiseTtlMs,
  });
  const promise = (scope: CallScope, spanId: string): { held: Promise<boolean>; send(): void } => {
    const request = promiseOf(scope, spanId);
    if (!carrying) return { held: alone(request), send: () => {} };
    const carried = recorder.carry(request);
    const held = carried.outcome.then(async (outcome) => {
      if (outcome === "held" || refused) return outcome === "held";
      // Alone, the store takes it or says why not (a PostgreSQL store: from then on spans are stored first).
      const taken = await alone(request);
      if (outcome === "unread" && carrying) {
        carrying = false;
        logger.info("the store does not read span promises sent with AddSpans; each is sent alone (ExpectSpans)");
      }
      return taken;
    });
    return { held, send: carried.send };
  };
  /** A call that promises its own span (no holds). */
  const promising = (scope: CallScope, spanId: string): CallOrder => {
    let sentAt = performance.now();
    let promised = promise(scope, spanId);
    return {
      answerFirst() {
        if (performance.now() - sentAt > promiseTtlMs / 2) {
          sentAt = performance.now();
          promised = promise(scope, spanId);
        }
        promised.send();
        return promised.held;
      },
      recorded: nothing,
    };
  };
  const withdraw = (scope: CallScope, spanId: string) =>
    store.expectSpans({ rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [spanId], withdraw: true }).catch(nothing);
  const take = (scope: CallScope): Hold => {
    const now = performance.now();
    for (const [id, old] of holds) {
      if (now - old.sentAt < holdTtlMs) break;
      // Gone at the store too: what an attempt that never finished leaves.
      if (old.calls > 0) continue;
      holds.delete(id);
      if (current.get(attemptKey(old.request)) === old) current.delete(attemptKey(old.request));
    }
    const id = randomBytes(8).toString("hex");
    const request = { rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [id] as [string], hold: true, ttlMs: holdTtlMs };
    const carried = recorder.carry(request);
    const hold: Hold = {
      request,
      sentAt: now,
      send: carried.send,
      calls: 0,
      releasing: false,
      live: true,
      released: false,
      outcome: carried.outcome,
    };
    void carried.outcome.then((outcome) => {
      if (outcome === "held as a promise") {
        if (holding) logger.info("the store does not take holds; each call promises its span");
        holding = false;
        withdraw(scope, id);
      } else if (outcome === "unread") {
        if (carrying) logger.info("the store does not read span promises sent with AddSpans; each is sent alone (ExpectSpans)");
        holding = carrying = false;
      }
    });
    holds.set(id, hold);
    return hold;
  };
  /** Releases in progress. */
  const releases = new Set<Promise<void>>();
  const sendRelease = (entry: SpanPromise) => {
    const released = recorder.release(entry);
    releases.add(released);
    void released.finally(() => releases.delete(released));
  };
  /** Releases the hold once its calls are over. */
  const releaseWhenOver = (hold: Hold) => {
    hold.releasing = true;
    if (current.get(attemptKey(hold.request)) === hold) current.delete(attemptKey(hold.request));
    if (hold.calls > 0 || hold.released) return;
    hold.released = true;
    holds.delete(hold.request.spanIds[0]);
    sendRelease({ ...hold.request, ttlMs: 0, withdraw: true });
  };
  return {
    describe(scope, spanId) {
      if (spanId === undefined || refused || !carrying) return recorder.describe(scope);
      let told!: (outcome: CarriedOutcome) => void;
      described.set(spanId, { outcome: new Promise((resolve) => (told = resolve)), sentAt: performance.now() });
      return recorder.describe(scope, { request: promiseOf(scope, spanId), resolve: (outcome) => told(outcome) });
    },
    unused(scope, spanId) {
      if (described.delete(spanId)) withdraw(scope, spanId);
    },
    begin(scope, spanId) {
      const early = described.get(spanId);
      described.delete(spanId);
      if (refused) return never;
      const key = attemptKey(scope);
      if (early) {
        // The first call's promise went with the attempt's description: no message of its own.
        started.set(key, true, 1);
        return {
          async answerFirst() {
            const fresh = performance.now() - early.sentAt < promiseTtlMs / 2;
            return ((await early.outcome) === "held" && fresh) || promising(scope, spanId).answerFirst();
          },
          recorded: nothing,
        };
      }
      if (!carrying || !holding) return promising(scope, spanId);
      let hold = current.get(key);
      // An attempt's first call promises its own span: an agent that makes one call would pay a hold's release for it.
      if (!hold && !started.get(key)) {
        started.set(key, true, 1);
        return promising(scope, spanId);
      }
      if (!hold || performance.now() - hold.sentAt > holdReuseMs) {
        hold = take(scope);
        current.set(key, hold);
      }
      const on = hold;
      on.calls++;
      let over = false;
      return {
        async answerFirst() {
          on.send();
          const outcome = await on.outcome;
          if (outcome === "held" && on.live && performance.now() - on.sentAt < holdTtlMs / 2) return true;
          // Refused (an unknown rollout, a PostgreSQL store): alone, the promise learns which.
          if (outcome === "refused") return alone(promiseOf(scope, spanId));
          return promising(scope, spanId).answerFirst();
        },
        recorded() {
          if (over) return;
          over = true;
          on.calls--;
          if (on.releasing) releaseWhenOver(on);
        },
      };
    },
    lost: withdraw,
    release(entries) {
      for (const entry of entries) {
        const hold = holds.get(entry.spanIds[0] ?? "");
        // One this proxy no longer knows (it outlived its TTL here): its spans went long ago.
        if (!hold) {
          sendRelease(entry);
          continue;
        }
        releaseWhenOver(hold);
      }
    },
    // The store keeps the stream's holds until they are released or their TTL passes: calls answer first on them no
    // longer, and each is released, on the next stream, once its calls are over.
    ended() {
      for (const hold of [...holds.values()]) {
        hold.live = false;
        releaseWhenOver(hold);
      }
    },
    async releaseAll() {
      for (const hold of [...holds.values()]) releaseWhenOver(hold);
      await Promise.all(releases);
    },
  };
}
