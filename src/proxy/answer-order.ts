import { Code, ConnectError } from "@connectrpc/connect";
import type { StoreApi } from "../store/store-api.js";
import type { CallScope } from "./scope-check.js";

/**
 * Whether a call's answer may end before its span is stored. Either way an attempt cannot finish before its spans
 * land: answered first, the span is something the store already waits for.
 */
export interface AnswerOrder {
  /** Resolves true when the answer may end first (the store will hold the rollout's updates until the span lands). */
  mayAnswerFirst(scope: CallScope, spanId: string): Promise<boolean>;
  /** A span answered first could not be stored: the store need not wait for it any longer. */
  lost(scope: CallScope, spanId: string): void;
}

/**
 * The proxy runs in the store's process and registers each span write with the store's pending writes in the same
 * tick as it ends the answer: always answer first.
 */
export const inProcessOrder: AnswerOrder = { mayAnswerFirst: async () => true, lost: () => {} };

/** Store every span before its answer ends. */
export const spanFirstOrder: AnswerOrder = { mayAnswerFirst: async () => false, lost: () => {} };

/**
 * The store is another process: promise the span (`ExpectSpans`, a small call the store keeps in memory) and answer
 * once the store holds the promise; store the span right after. A store that cannot hold promises (PostgreSQL, or
 * a server without the method) is asked once: from then on spans are stored first. Any other failure makes that
 * call store its span first.
 */
export function promisedOrder(store: StoreApi, log: (message: string) => void): AnswerOrder {
  let refused = false;
  return {
    async mayAnswerFirst(scope, spanId) {
      if (refused) return false;
      try {
        await store.expectSpans({ rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [spanId] });
        return true;
      } catch (error) {
        const e = ConnectError.from(error);
        if (e.code === Code.FailedPrecondition || e.code === Code.Unimplemented) {
          refused = true;
          log(`agl proxy: the store does not hold span promises (${e.rawMessage}); each span is stored before its answer ends`);
        }
        return false;
      }
    },
    lost(scope, spanId) {
      store.expectSpans({ rolloutId: scope.rolloutId, attemptId: scope.attemptId, spanIds: [spanId], withdraw: true }).catch(() => {});
    },
  };
}
