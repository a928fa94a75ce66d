import { Code, ConnectError } from "@connectrpc/connect";
import type { AttemptDescription } from "../gen/agl/v1/store_pb.js";
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
  /** `spanId`: the span of the call being checked, which the store may be asked about with the attempt (`describe`). */
  check(scope: CallScope, spanId?: string): Promise<ScopeRefusal | undefined>;
  /** The resources id of a checked scope's rollout ("" when it has none, or the scope was not checked). */
  resourcesIdOf(scope: CallScope): string;
  /** A checked scope's rollout's `metadata.agl_token_in`, when it is a boolean. */
  tokenInOf(scope: CallScope): boolean | undefined;
  /** The store said the attempt was cancelled: later calls of it are refused with 409. */
  markCancelled(scope: CallScope): void;
}

const keyOf = (s: CallScope) => `${s.rolloutId}/${s.attemptId}`;
type Known = { state: "ok"; resourcesId: string; tokenIn: boolean | undefined } | { state: "cancelled" };
type Found = { resourcesId: string; tokenIn: boolean | undefined };

/** Options of {@link createScopeChecker}. */
export interface ScopeCheckerOptions {
  /** Known attempts kept (default 100,000), the oldest forgotten first. */
  maxEntries?: number;
  /**
   * Asks the store about an attempt a cheaper way than `GetRollout` (a message on the proxy's span stream): null when
   * the store does not answer that way (it is not asked so again), undefined when the call failed; either way the
   * checker then reads the rollout.
   */
  describe?: (scope: CallScope, spanId: string | undefined) => Promise<AttemptDescription | null | undefined>;
}

const rolloutNotFound = (scope: CallScope): ScopeRefusal => ({
  status: 404,
  code: "rollout_not_found",
  message: `rollout ${JSON.stringify(scope.rolloutId)} does not exist in the store`,
});
const attemptNotFound = (scope: CallScope): ScopeRefusal => ({
  status: 404,
  code: "attempt_not_found",
  message: `attempt ${JSON.stringify(scope.attemptId)} does not exist for rollout ${scope.rolloutId}`,
});

/**
 * Creates a {@link ScopeChecker}. The first call of an attempt costs a store read (`describe`, else `GetRollout`, and
 * `QueryAttempts` when it is not the rollout's latest attempt); known attempts are kept, so later calls cost nothing.
 */
export function createScopeChecker(store: StoreApi, options: ScopeCheckerOptions = {}): ScopeChecker {
  const maxEntries = options.maxEntries ?? 100_000;
  let describe = options.describe;
  const known = new Map<string, Known>();
  const remember = (key: string, value: Known) => {
    known.delete(key);
    known.set(key, value);
    if (known.size > maxEntries) known.delete(known.keys().next().value as string);
  };
  const described = async (scope: CallScope, spanId: string | undefined): Promise<Found | ScopeRefusal | undefined> => {
    const attempt = await describe?.(scope, spanId);
    if (attempt === null) describe = undefined;
    if (!attempt) return undefined;
    if (!attempt.rolloutExists) return rolloutNotFound(scope);
    if (!attempt.attemptExists) return attemptNotFound(scope);
    return { resourcesId: attempt.resourcesId, tokenIn: attempt.tokenIn };
  };
  const exists = async (scope: CallScope, spanId: string | undefined): Promise<Found | ScopeRefusal> => {
    const answer = describe && (await described(scope, spanId));
    if (answer) return answer;
    try {
      const rollout = await store.getRollout({ rolloutId: scope.rolloutId });
      const flag = rollout.metadata?.agl_token_in;
      const found = { resourcesId: rollout.resourcesId, tokenIn: typeof flag === "boolean" ? flag : undefined };
      if (rollout.latestAttempt?.attemptId === scope.attemptId) return found;
      const { attempts } = await store.queryAttempts({ rolloutId: scope.rolloutId });
      if (attempts.some((a) => a.attemptId === scope.attemptId)) return found;
    } catch (error) {
      const e = ConnectError.from(error);
      if (e.code === Code.NotFound || e.code === Code.InvalidArgument) return rolloutNotFound(scope);
      return { status: 503, code: "store_unavailable", message: `cannot check the rollout in the store: ${e.rawMessage}` };
    }
    return attemptNotFound(scope);
  };
  return {
    async check(scope, spanId) {
      const key = keyOf(scope);
      const seen = known.get(key);
      if (seen?.state === "ok") return undefined;
      if (seen?.state === "cancelled") {
        return {
          status: 409,
          code: "attempt_cancelled",
          message: `attempt ${scope.attemptId} of rollout ${scope.rolloutId} was cancelled`,
        };
      }
      const found = await exists(scope, spanId);
      if ("status" in found) return found;
      remember(key, { state: "ok", ...found });
      return undefined;
    },
    resourcesIdOf(scope) {
      const seen = known.get(keyOf(scope));
      return seen?.state === "ok" ? seen.resourcesId : "";
    },
    tokenInOf(scope) {
      const seen = known.get(keyOf(scope));
      return seen?.state === "ok" ? seen.tokenIn : undefined;
    },
    markCancelled(scope) {
      remember(keyOf(scope), { state: "cancelled" });
    },
  };
}
