import { Code, ConnectError } from "@connectrpc/connect";
import type { StoreApi } from "../store/store-api.js";
import type { CallScope } from "./scope-check.js";
import type { Logger } from "../core/logger.js";
import type { SpanPromise, SpanRecorder } from "./span-recorder.js";

/**
 * Whether a call's answer may end before its span is stored. Either way an attempt cannot finish before its spans
 * land: answered first, the span is something the store already waits for.
 */
export interface AnswerOrder {
  /**
   * Called as a scoped call starts. The function it returns, called when the answer is about to end, resolves true
   * when the answer may end first (the store will hold the attempt's finishing updates until the span lands).
   */
  begin(scope: CallScope, spanId: string): () => Promise<boolean>;
  /** A span answered first could not be stored: the store need not wait for it any longer. */
  lost(scope: CallScope, spanId: string): void;
}

const yes = async () => true;
const no = async () => false;

/**
 * The proxy runs in the store's process and registers each span write with the store's pending writes in the same
 * tick as it ends the answer: always answer first.
 */
export const inProcessOrder: AnswerOrder = { begin: () => yes, lost: () => {} };

/** Store every span before its answer ends. */
export const spanFirstOrder: AnswerOrder = { begin: () => no, lost: () => {} };

/** How long a promise holds at the store; a call that outlives half of it promises its span again before answering. */
const promiseTtlMs = 10_000;

/**
 * The store is another process: promise the span as the call starts, so the promise travels while the engine works,
 * and answer first once the store holds it; the span is stored right after. The promise rides on the span recorder's
 * next `AddSpans` (`expect`): at once with the spans of calls that ended just before, otherwise with the next batch,
 * sent at the latest as the answer is about to end; so a proxy busy with calls makes about one call to the store per
 * LLM call, not two. Without `carry`, or once a store turned out not to take promises that way (it predates them), each
 * goes alone (`ExpectSpans`, a small call the store keeps in memory). A store that cannot hold promises (PostgreSQL,
 * or a server without the method) is asked once: from then on spans are stored first. Any other failure makes that
 * call store its span first.
 */
export function promisedOrder(store: StoreApi, logger: Logger, carry?: SpanRecorder["carry"]): AnswerOrder {
  let refused = false;
  let carrying = carry !== undefined;
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
  const promise = (scope: CallScope, spanId: string): { held: Promise<boolean>; send(): void } => {
    const request = { rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [spanId], ttlMs: promiseTtlMs };
    if (!carry || !carrying) return { held: alone(request), send: () => {} };
    const carried = carry(request);
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
  return {
    begin(scope, spanId) {
      if (refused) return no;
      let sentAt = performance.now();
      let promised = promise(scope, spanId);
      return () => {
        if (performance.now() - sentAt > promiseTtlMs / 2) {
          sentAt = performance.now();
          promised = promise(scope, spanId);
        }
        promised.send();
        return promised.held;
      };
    },
    lost(scope, spanId) {
      store.expectSpans({ rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [spanId], withdraw: true }).catch(() => {});
    },
  };
}
