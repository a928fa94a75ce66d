import { writeSpans } from "../client/span-writer.js";
import { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import type { PendingWrites } from "../store/pending-writes.js";
import type { StoreApi } from "../store/store-api.js";
import { type CallRecord, callSpan } from "./call-span.js";
import type { CallScope, ScopeChecker } from "./scope-check.js";
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
  /** Sends what waits for a batch now. */
  flush(): void;
}

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

/** Creates a {@link SpanRecorder}. */
export function createSpanRecorder(options: SpanRecorderOptions): SpanRecorder {
  const stats: RecorderStats = { spansRecorded: 0, spanWriteErrors: 0 };
  const timeoutMs = options.timeoutMs ?? 5_000;
  const lingerMs = options.batchLingerMs ?? 0;
  const maxBatch = options.maxBatch ?? 64;
  const write = async (calls: Scoped[]) => {
    const bySpan = new Map(calls.map((call) => [call.spanId, call]));
    const { acks, failed } = await writeSpans(options.store, calls.map(callSpan), { callTimeoutMs: timeoutMs });
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
  };

  let batch: { calls: Scoped[]; written: Promise<void>; send(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    const full = batch;
    batch = undefined;
    full?.send();
  };
  const join = (call: Scoped): Promise<void> => {
    if (!batch) {
      let send!: () => void;
      const calls: Scoped[] = [];
      const written = new Promise<void>((resolve) => (send = () => void write(calls).then(resolve)));
      batch = { calls, written, send };
      timer = setTimeout(flush, lingerMs);
    }
    const joined = batch;
    joined.calls.push(call);
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
    flush,
  };
}
