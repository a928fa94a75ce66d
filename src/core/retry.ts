import { Code, ConnectError } from "@connectrpc/connect";

const transientCodes = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Aborted, Code.Internal, Code.Unknown]);

/** A store error that may pass if the call is repeated (unavailable, deadline, aborted, internal, unknown). */
export const isTransientStoreError = (error: unknown): boolean => transientCodes.has(ConnectError.from(error).code);

/** Options of {@link withRetries}. */
export interface RetryOptions {
  /** Default 5, or unlimited when `forMs` is given. */
  tries?: number;
  /** Gives up once this long has passed since the first try (the store stayed unreachable). Default: no limit. */
  forMs?: number;
  /** First delay; doubles per try, with jitter. Default 100 ms. */
  baseMs?: number;
  /** Longest delay between tries. Default 5 s. */
  maxMs?: number;
  /** Which errors are worth another try. Default: {@link isTransientStoreError}. */
  retryable?(error: unknown): boolean;
  /** The delay before try `n + 1`, when the failure says how long to wait (a `Retry-After`). Default: {@link backoffMs}. */
  delayMs?(n: number, error: unknown): number;
  /** Called before each wait (to count retries). */
  onRetry?(error: unknown, n: number): void;
  /** Stops retrying (the last error is thrown); a wait in progress ends at once. */
  signal?: AbortSignal;
  /** Lets the process exit during a wait (background work must not keep it alive). */
  unref?: boolean;
}

/**
 * Calls `fn` until it succeeds, retrying the errors `retryable` accepts; when it gives up, the last error is thrown.
 * Only for calls that are safe to repeat: updates that set the same fields, span writes (idempotent by span id).
 */
export async function withRetries<T>(fn: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const tries = options.tries ?? (options.forMs === undefined ? 5 : Number.POSITIVE_INFINITY);
  const giveUpAt = performance.now() + (options.forMs ?? Number.POSITIVE_INFINITY);
  const retryable = options.retryable ?? isTransientStoreError;
  for (let n = 1; ; n++) {
    try {
      return await fn();
    } catch (error) {
      const left = giveUpAt - performance.now();
      if (n >= tries || left <= 0 || options.signal?.aborted || !retryable(error)) throw error;
      options.onRetry?.(error, n);
      await sleep(Math.min(left, options.delayMs?.(n, error) ?? backoffMs(n, options.baseMs ?? 100, options.maxMs ?? 5_000)), options);
      if (options.signal?.aborted) throw error;
    }
  }
}

/** The delay before try `n + 1` (n ≥ 1): exponential with jitter, or what a `Retry-After` header asks (capped). */
export function backoffMs(n: number, baseMs: number, maxMs: number, retryAfter?: string | string[] | null): number {
  const header = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
  const seconds = header === undefined || header === null ? Number.NaN : Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, maxMs);
  const ceiling = Math.min(baseMs * 2 ** Math.min(n - 1, 30), maxMs);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Options of {@link sleep}. */
export interface SleepOptions {
  /** Ends the wait early (the promise still resolves: callers check the signal). */
  signal?: AbortSignal;
  /** Lets the process exit meanwhile (a background retry must not keep it alive). */
  unref?: boolean;
  /** Given the function that ends the wait early: an event the caller waits for calls it. */
  wake?: (done: () => void) => void;
}

/** Resolves after `ms` (never, when not finite), as soon as `options.signal` aborts, or when woken. */
export function sleep(ms: number, options: SleepOptions = {}): Promise<void> {
  const { signal } = options;
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = Number.isFinite(ms) ? setTimeout(done, Math.max(0, ms)) : undefined;
    if (options.unref) timer?.unref();
    signal?.addEventListener("abort", done, { once: true });
    options.wake?.(done);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
