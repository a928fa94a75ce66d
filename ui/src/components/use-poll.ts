import { Code, ConnectError } from "@connectrpc/connect";
import { type DependencyList, useEffect, useRef, useState } from "react";
import { useStore } from "./store-context.js";

export interface PollState<T> {
  data?: T;
  error?: ConnectError;
  loading: boolean;
}

/**
 * Loads `load()` now and again every `intervalMs` after each answer (none when undefined), until `deps` change or the
 * view goes away; a call in flight is aborted then. Keeps the last data through a failed reload, and while the
 * first answer for new `deps` is on its way (a table does not blank out between two filters). A refused token goes
 * to the auth gate.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number | undefined, deps: DependencyList): PollState<T> {
  const { unauthenticated } = useStore();
  const [state, setState] = useState<PollState<T>>({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;

  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide when to start over
  useEffect(() => {
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    setState((s) => (s.data === undefined ? { loading: true } : { data: s.data, loading: true }));
    const tick = async () => {
      try {
        const data = await loadRef.current(abort.signal);
        if (!abort.signal.aborted) setState({ data, loading: false });
      } catch (cause) {
        if (abort.signal.aborted) return;
        const error = ConnectError.from(cause);
        if (error.code === Code.Unauthenticated) unauthenticated(error.rawMessage);
        setState((s) => ({ ...s, error, loading: false }));
      }
      if (!abort.signal.aborted && intervalMs !== undefined) timer = setTimeout(tick, intervalMs);
    };
    void tick();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [...deps, intervalMs]);
  return state;
}
