import { Code, ConnectError } from "@connectrpc/connect";
import { type FormEvent, type ReactNode, useCallback, useEffect, useMemo, useState } from "react";
import { createStoreClients } from "../api/store-client.js";
import { readToken, saveToken } from "../api/token.js";
import { StoreContext, type StoreContextValue } from "./store-context.js";

type Gate = { state: "checking" } | { state: "open" } | { state: "token"; message?: string };

/**
 * Lets the app in once the store accepts its calls: probes GetStatistics with the session's token (or none); when the
 * store answers UNAUTHENTICATED, asks for a token and shows why the last one was refused.
 */
export function AuthGate({ children }: { children: ReactNode }) {
  const clients = useMemo(() => createStoreClients({ baseUrl: window.location.origin, token: readToken }), []);
  const [gate, setGate] = useState<Gate>({ state: "checking" });
  const [draft, setDraft] = useState("");

  const probe = useCallback(async () => {
    try {
      await clients.store.getStatistics({});
      setGate({ state: "open" });
    } catch (cause) {
      const error = ConnectError.from(cause);
      if (error.code !== Code.Unauthenticated) setGate({ state: "open" });
      else if (readToken() === undefined) setGate({ state: "token" });
      else setGate({ state: "token", message: `The store refused this token: ${error.rawMessage}` });
    }
  }, [clients]);

  useEffect(() => {
    void probe();
  }, [probe]);

  const unauthenticated = useCallback(
    (message: string) => setGate({ state: "token", message: `The store refused the call: ${message}` }),
    [],
  );
  const context = useMemo<StoreContextValue>(() => ({ clients, unauthenticated }), [clients, unauthenticated]);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    saveToken(draft.trim());
    setDraft("");
    setGate({ state: "checking" });
    void probe();
  };

  if (gate.state === "checking")
    return (
      <div className="loading" data-testid="loading">
        Connecting to the store…
      </div>
    );
  if (gate.state === "token") {
    return (
      <form className="auth-form" data-testid="auth-form" onSubmit={submit}>
        <h1>agl</h1>
        <p>This store requires a token. It is kept for this browser tab only.</p>
        <label>
          Token
          <input
            type="password"
            autoComplete="off"
            data-testid="auth-token-input"
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
            // biome-ignore lint/a11y/noAutofocus: the form is the whole page; typing the token is the only thing to do
            autoFocus
          />
        </label>
        <button type="submit" data-testid="auth-submit" disabled={draft.trim() === ""}>
          Connect
        </button>
        {gate.message === undefined ? null : (
          <p className="error-banner" role="alert" data-testid="auth-error">
            {gate.message}
          </p>
        )}
      </form>
    );
  }
  return <StoreContext.Provider value={context}>{children}</StoreContext.Provider>;
}

/** Forgets the token and asks for one again. */
export function forgetToken(): void {
  saveToken(undefined);
  window.location.reload();
}
