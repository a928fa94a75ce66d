/** What new requests meet while the proxy is paused. */
export type PauseMode = "wait" | "reject";

/** Options of {@link PauseGate.pause}. */
export interface PauseOptions {
  /** `wait` (default): new requests wait for `resume()`; `reject`: they get 429 with `Retry-After`. */
  mode?: PauseMode;
  /** `Retry-After` sent in `reject` mode and when a wait times out (default 5). */
  retryAfterSeconds?: number;
}

/** The gate's state, as the admin route reports it. */
export interface PauseState {
  paused: boolean;
  mode: PauseMode;
  /** Requests forwarded to an engine and not finished yet. */
  inFlight: number;
  /** Requests waiting for `resume()`. */
  waiting: number;
}

/** Why a request may not pass. */
export interface GateRefusal {
  reason: "paused" | "wait_timeout" | "aborted";
  retryAfterSeconds: number;
}

/**
 * Admission control for weight swaps: `pause()` stops new requests from reaching the engines (they wait or are
 * refused), requests already in flight finish, `drain()` resolves once none is in flight, `resume()` lets the waiting
 * ones through in arrival order.
 */
export interface PauseGate {
  pause(options?: PauseOptions): void;
  resume(): void;
  /** Resolves true once no request is in flight, or false when `timeoutMs` passes first. */
  drain(timeoutMs?: number): Promise<boolean>;
  /** Admits a request (counting it in flight) or says why not. Call `leave()` once for every admitted request. */
  enter(signal?: AbortSignal): Promise<GateRefusal | undefined>;
  leave(): void;
  state(): PauseState;
}

/** Options of {@link createPauseGate}. */
export interface PauseGateOptions {
  /** Longest a request waits while paused before it is refused with 429 (default 300,000 ms). */
  maxWaitMs?: number;
}

/** Creates an open {@link PauseGate}. */
export function createPauseGate(options: PauseGateOptions = {}): PauseGate {
  const maxWaitMs = options.maxWaitMs ?? 300_000;
  let paused = false;
  let mode: PauseMode = "wait";
  let retryAfterSeconds = 5;
  let inFlight = 0;
  const waiting = new Set<() => void>();
  const drainers = new Set<() => void>();

  const settleDrainers = () => {
    if (inFlight > 0) return;
    for (const done of drainers) done();
    drainers.clear();
  };

  return {
    pause(opts = {}) {
      paused = true;
      mode = opts.mode ?? "wait";
      retryAfterSeconds = opts.retryAfterSeconds ?? 5;
    },
    resume() {
      paused = false;
      const admitted = [...waiting];
      waiting.clear();
      for (const admit of admitted) admit();
    },
    drain(timeoutMs) {
      if (inFlight === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = () => {
          clearTimeout(timer);
          resolve(true);
        };
        drainers.add(done);
        if (timeoutMs !== undefined) {
          timer = setTimeout(() => {
            drainers.delete(done);
            resolve(false);
          }, timeoutMs);
        }
      });
    },
    async enter(signal) {
      if (paused && mode === "reject") return { reason: "paused", retryAfterSeconds };
      if (paused) {
        const outcome = await new Promise<"admitted" | "timeout" | "aborted">((resolve) => {
          const admit = () => finish("admitted");
          const onAbort = () => finish("aborted");
          const timer = setTimeout(() => finish("timeout"), maxWaitMs);
          function finish(how: "admitted" | "timeout" | "aborted") {
            clearTimeout(timer);
            waiting.delete(admit);
            signal?.removeEventListener("abort", onAbort);
            resolve(how);
          }
          waiting.add(admit);
          signal?.addEventListener("abort", onAbort);
          if (signal?.aborted) onAbort();
        });
        if (outcome === "timeout") return { reason: "wait_timeout", retryAfterSeconds };
        if (outcome === "aborted") return { reason: "aborted", retryAfterSeconds };
      }
      inFlight++;
      return undefined;
    },
    leave() {
      inFlight--;
      settleDrainers();
    },
    state: () => ({ paused, mode, inFlight, waiting: waiting.size }),
  };
}
