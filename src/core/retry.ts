import { Code, ConnectError } from "@connectrpc/connect";

const transient = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Aborted, Code.Internal, Code.Unknown]);

/** Options of {@link withRetries}. */
export interface RetryOptions {
  /** Default 5, or unlimited when `forMs` is given. */
  tries?: number;
  /** Gives up once this long has passed since the first try (the store stayed unreachable). Default: no limit. */
  forMs?: number;
  /** First delay; doubles per try. Default 100 ms. */
  baseMs?: number;
  signal?: AbortSignal;
}

/**
 * Calls `fn` until it succeeds, retrying transient store errors (unavailable, deadline, internal). Only for calls that
 * are safe to repeat: updates that set the same fields, span writes (idempotent by span id).
 */
export async function withRetries<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const tries = options.tries ?? (options.forMs === undefined ? 5 : Number.POSITIVE_INFINITY);
  const giveUpAt = performance.now() + (options.forMs ?? Number.POSITIVE_INFINITY);
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const code = ConnectError.from(error).code;
      if (attempt >= tries || !transient.has(code) || options.signal?.aborted) throw error;
      const delay = Math.min(5_000, (options.baseMs ?? 100) * 2 ** Math.min(attempt - 1, 16));
      const left = giveUpAt - performance.now();
      if (left <= 0) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, left)));
    }
  }
}
