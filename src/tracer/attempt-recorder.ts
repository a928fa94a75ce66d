import type { Span } from "../gen/agl/v1/types_pb.js";

/** Options of {@link createAttemptRecorder}. */
export interface AttemptRecorderOptions {
  /** Receives batches of finished spans while the attempt runs (they become heartbeats at the store). */
  onBatch(spans: Span[]): void;
  /** Spans per batch. Default 64. */
  batchSize?: number;
  /** Longest a finished span waits before its batch leaves. Default 200 ms. */
  flushMs?: number;
}

/** Collects one attempt's finished spans in the thread that runs the agent and hands them on in batches. */
export interface AttemptRecorder {
  record(span: Span): void;
  /** Ends recording and returns what was not handed on yet (the runner ships them last, before the attempt's status). */
  close(): Span[];
  /** Spans that ended after `close()` (an agent that kept running after its attempt ended); they are not stored. */
  readonly late: number;
}

/** Creates a recorder for one attempt. */
export function createAttemptRecorder(options: AttemptRecorderOptions): AttemptRecorder {
  const batchSize = options.batchSize ?? 64;
  const flushMs = options.flushMs ?? 200;
  let pending: Span[] = [];
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let late = 0;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    options.onBatch(batch);
  };
  return {
    record(span) {
      if (closed) {
        late++;
        return;
      }
      pending.push(span);
      if (pending.length >= batchSize) flush();
      else if (!timer) timer = setTimeout(flush, flushMs).unref();
    },
    close() {
      closed = true;
      clearTimeout(timer);
      const rest = pending;
      pending = [];
      return rest;
    },
    get late() {
      return late;
    },
  };
}
