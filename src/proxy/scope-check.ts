import { Code, ConnectError } from "@connectrpc/connect";
import type { StoreApi } from "../store/store-api.js";

/** The rollout and attempt a call belongs to (from `/rollout/{rollout_id}/attempt/{attempt_id}/…`). */
export interface CallScope {
  rolloutId: string;
  attemptId: string;
}

/** Why a scope was refused: an HTTP status and a message for the agent's developer. */
export interface ScopeRefusal {
  status: 404 | 409 | 503;
  code: string;
  message: string;
}

/** Checks scopes against the store, remembering the ones that exist. */
export interface ScopeChecker {
  check(scope: CallScope): Promise<ScopeRefusal | undefined>;
  /** The store said the attempt was cancelled: later calls of it are refused with 409. */
  markCancelled(scope: CallScope): void;
}

const keyOf = (s: CallScope) => `${s.rolloutId}/${s.attemptId}`;

/**
 * Creates a {@link ScopeChecker}. The first call of an attempt costs one store read; known attempts are kept (up to
 * `maxEntries`, oldest forgotten first), so later calls cost nothing.
 */
export function createScopeChecker(store: StoreApi, maxEntries = 100_000): ScopeChecker {
  const known = new Map<string, "ok" | "cancelled">();
  const remember = (key: string, value: "ok" | "cancelled") => {
    known.delete(key);
    known.set(key, value);
    if (known.size > maxEntries) known.delete(known.keys().next().value as string);
  };
  return {
    async check(scope) {
      const key = keyOf(scope);
      const seen = known.get(key);
      if (seen === "ok") return undefined;
      if (seen === "cancelled") {
        return { status: 409, code: "attempt_cancelled", message: `attempt ${scope.attemptId} of rollout ${scope.rolloutId} was cancelled` };
      }
      let attempts;
      try {
        ({ attempts } = await store.queryAttempts({ rolloutId: scope.rolloutId }));
      } catch (error) {
        const e = ConnectError.from(error);
        if (e.code === Code.NotFound || e.code === Code.InvalidArgument) {
          return { status: 404, code: "rollout_not_found", message: `rollout ${JSON.stringify(scope.rolloutId)} does not exist in the store` };
        }
        return { status: 503, code: "store_unavailable", message: `cannot check the rollout in the store: ${e.rawMessage}` };
      }
      if (!attempts.some((a) => a.attemptId === scope.attemptId)) {
        return {
          status: 404,
          code: "attempt_not_found",
          message: `attempt ${JSON.stringify(scope.attemptId)} does not exist for rollout ${scope.rolloutId}`,
        };
      }
      remember(key, "ok");
      return undefined;
    },
    markCancelled(scope) {
      remember(keyOf(scope), "cancelled");
    },
  };
}
