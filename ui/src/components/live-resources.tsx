import { Code, ConnectError } from "@connectrpc/connect";
import { createContext, type ReactNode, useContext, useEffect, useState } from "react";
import type { ResourcesUpdate } from "../../../src/gen/agl/v1/types_pb.js";
import { useStore } from "./store-context.js";

export interface LiveResources {
  /** The latest snapshot published, when any. */
  latest?: ResourcesUpdate;
  /** Every version seen on the stream since the page opened, oldest first (the store keeps only the latest of an id). */
  seen: ResourcesUpdate[];
  /** Whether the stream is open now. */
  live: boolean;
}

const MAX_SEEN = 1000;
const LiveResourcesContext = createContext<LiveResources>({ seen: [], live: false });

export const useLiveResources = () => useContext(LiveResourcesContext);

/** Follows `WatchResources` (with the latest first) for the whole app, reconnecting after a pause when it drops. */
export function LiveResourcesProvider({ children }: { children: ReactNode }) {
  const { clients, unauthenticated } = useStore();
  const [state, setState] = useState<LiveResources>({ seen: [], live: false });

  useEffect(() => {
    const abort = new AbortController();
    const follow = async () => {
      let delayMs = 1000;
      while (!abort.signal.aborted) {
        try {
          const stream = clients.resources.watchResources({ includeLatest: true }, { signal: abort.signal });
          setState((s) => ({ ...s, live: true }));
          for await (const update of stream) {
            delayMs = 1000;
            setState((s) => ({ latest: update, live: true, seen: [...s.seen, update].slice(-MAX_SEEN) }));
          }
        } catch (cause) {
          if (abort.signal.aborted) return;
          const error = ConnectError.from(cause);
          if (error.code === Code.Unauthenticated) {
            unauthenticated(error.rawMessage);
            return;
          }
        }
        setState((s) => ({ ...s, live: false }));
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        delayMs = Math.min(delayMs * 2, 30_000);
      }
    };
    void follow();
    return () => abort.abort();
  }, [clients, unauthenticated]);

  return <LiveResourcesContext.Provider value={state}>{children}</LiveResourcesContext.Provider>;
}
