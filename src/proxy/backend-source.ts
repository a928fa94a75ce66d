import type { ResourcesUpdate } from "../gen/agl/v1/types_pb.js";
import { sleep } from "../core/retry.js";
import type { StoreApi } from "../store/store-api.js";
import type { Backend, BackendSet } from "./backends.js";

/** Where the proxy's backends come from. */
export interface BackendSource {
  /** The backends in force now; undefined while none are known yet. */
  current(): BackendSet | undefined;
  /** Resolves once backends are known. */
  readonly ready: Promise<void>;
  close(): void;
}

/** A fixed list of backends (the `--backend` flags). */
export function staticBackends(backends: readonly Backend[]): BackendSource {
  const set: BackendSet = { backends: [...backends], resourcesId: "", resourcesVersion: 0 };
  return { current: () => set, ready: Promise.resolve(), close: () => {} };
}

/** Options of {@link storeBackends}. */
export interface StoreBackendsOptions {
  store: StoreApi;
  /** Only LLM resources with these names; default every `llm` resource of the snapshot. */
  resourceNames?: readonly string[];
  /** Called when the watch fails (it is re-established with backoff). */
  onError?: (error: unknown) => void;
  /** Given every update the watch brings, whether it holds matching LLMs or not. */
  onUpdate?: (update: ResourcesUpdate) => void;
}

/** The `llm` resources of a snapshot as backends (`proxy_llm` entries point at the proxy itself and are skipped). */
export function backendsOf(update: ResourcesUpdate, names?: readonly string[]): Backend[] {
  const backends: Backend[] = [];
  for (const name of Object.keys(update.resources).sort()) {
    if (names && !names.includes(name)) continue;
    const kind = update.resources[name]?.kind;
    if (kind?.case !== "llm") continue;
    const llm = kind.value;
    const tokenIn = llm.samplingParameters?.agl_token_in;
    backends.push({
      endpoint: llm.endpoint,
      model: llm.model,
      name,
      ...(llm.apiKey ? { apiKey: llm.apiKey } : {}),
      ...(typeof tokenIn === "boolean" ? { tokenIn } : {}),
    });
  }
  return backends;
}

/**
 * Backends from the store's latest resources: follows `WatchResources` (latest first, then every new version), so a
 * trainer that publishes new engine endpoints redirects the proxy without a restart. A snapshot with no matching LLM
 * keeps the previous backends. The watch is re-established when it fails.
 */
export function storeBackends(options: StoreBackendsOptions): BackendSource {
  const closed = new AbortController();
  let set: BackendSet | undefined;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const apply = (update: ResourcesUpdate) => {
    options.onUpdate?.(update);
    const backends = backendsOf(update, options.resourceNames);
    if (backends.length === 0) return;
    set = { backends, resourcesId: update.resourcesId, resourcesVersion: update.version };
    markReady();
  };
  followResources(options.store, { includeLatest: true }, closed.signal, apply, (error) => options.onError?.(error));
  return { current: () => set, ready, close: () => closed.abort() };
}

/**
 * Follows `WatchResources` in the background until `signal` aborts, passing each update to `onUpdate`; a failed watch
 * is reported and re-established after a backoff (0.1 s, doubling up to 5 s).
 */
export function followResources(
  store: StoreApi,
  request: { includeLatest: boolean },
  signal: AbortSignal,
  onUpdate: (update: ResourcesUpdate) => void,
  onError: (error: unknown) => void,
): void {
  void (async () => {
    let delayMs = 100;
    while (!signal.aborted) {
      try {
        for await (const update of store.watchResources(request, { signal })) {
          onUpdate(update);
          delayMs = 100;
        }
      } catch (error) {
        if (signal.aborted) return;
        onError(error);
      }
      await sleep(delayMs, { signal, unref: true });
      delayMs = Math.min(delayMs * 2, 5_000);
    }
  })();
}
