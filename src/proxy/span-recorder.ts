import { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import type { PendingWrites } from "../store/pending-writes.js";
import type { StoreApi } from "../store/store-api.js";
import { type CallRecord, callSpan } from "./call-span.js";
import type { ScopeChecker } from "./scope-check.js";

/** Counters of what the recorder did. */
export interface RecorderStats {
  spansRecorded: number;
  spanWriteErrors: number;
}

/** Writes one span per call to the store; never throws (a store failure is logged and counted, the call still served). */
export interface SpanRecorder {
  /** Stores the call's span; with pending writes, registers the write there before returning. */
  record(call: CallRecord): Promise<void>;
  stats(): RecorderStats;
}

/** Options of {@link createSpanRecorder}. */
export interface SpanRecorderOptions {
  store: StoreApi;
  scopes: ScopeChecker;
  /** The in-process store's pending writes, where each span write is registered as it starts. */
  pendingWrites?: PendingWrites;
  /** Told when a span write failed, so a store waiting for that span stops waiting. */
  onLost?: (scope: NonNullable<CallRecord["scope"]>, spanId: string) => void;
  /** Longest wait for the store per span (default 5,000 ms). */
  timeoutMs?: number;
  log: (message: string) => void;
}

/** Creates a {@link SpanRecorder}. */
export function createSpanRecorder(options: SpanRecorderOptions): SpanRecorder {
  const stats: RecorderStats = { spansRecorded: 0, spanWriteErrors: 0 };
  const timeoutMs = options.timeoutMs ?? 5_000;
  const write = async (call: CallRecord, scope: NonNullable<CallRecord["scope"]>) => {
    try {
      const { acks } = await options.store.addSpans({ spans: [callSpan(call)] }, { timeoutMs });
      stats.spansRecorded++;
      if (acks[0]?.attemptStatus === AttemptStatus.CANCELLED) options.scopes.markCancelled(scope);
    } catch (error) {
      stats.spanWriteErrors++;
      const reason = error instanceof Error ? error.message : String(error);
      options.log(`agl proxy: could not store the span of a call of rollout ${scope.rolloutId}: ${reason}`);
      options.onLost?.(scope, call.spanId);
    }
  };
  return {
    record(call) {
      const scope = call.scope;
      if (!scope) return Promise.resolve();
      const written = write(call, scope);
      options.pendingWrites?.add(scope.rolloutId, written);
      return written;
    },
    stats: () => ({ ...stats }),
  };
}
