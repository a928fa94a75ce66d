import { Code, type ConnectError } from "@connectrpc/connect";

/** A failed store call, with its gRPC code name and the store's message. */
export function ErrorBanner({ error }: { error: ConnectError | undefined }) {
  if (error === undefined) return null;
  const code = (Code[error.code] ?? "unknown").replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  return (
    <div className="error-banner" role="alert" data-testid="error-banner">
      <strong>{code}</strong>: {error.rawMessage}
    </div>
  );
}

export function Loading() {
  return (
    <div className="loading" data-testid="loading">
      Loading…
    </div>
  );
}
