import { Code, ConnectError } from "@connectrpc/connect";

/** How the PostgreSQL backend treats an error raised by the driver or the server. */
export type ErrorKind =
  /** Serialization failure or deadlock: the transaction did nothing; run it again. */
  | "conflict"
  /** A concurrent transaction inserted the same key first: running again sees it. */
  | "duplicate"
  /** The connection failed or the server is going away, starting or full. */
  | "connection"
  /** Text the database cannot store (NUL characters). */
  | "text"
  | "other";

const connectionCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "53300", // too_many_connections
  "25P03", // idle_in_transaction_session_timeout
]);

const connectionMessages =
  /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|Client was closed|terminating connection/i;

export function classify(error: unknown): ErrorKind {
  if (!(error instanceof Error)) return "other";
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    if (code === "40001" || code === "40P01") return "conflict";
    if (code === "23505") return "duplicate";
    if (code === "22021" || code === "22P05") return "text";
    if (connectionCodes.has(code) || code.startsWith("08")) return "connection";
  }
  if (error instanceof ConnectError) return "other";
  return connectionMessages.test(error.message) ? "connection" : "other";
}

/** UNAVAILABLE: clients retry it (those whose calls are safe to repeat). */
export function unavailable(error: unknown, committing: boolean): ConnectError {
  const reason = error instanceof Error ? error.message : String(error);
  const message = committing
    ? `the database connection failed while committing (${reason}); the change may or may not have been stored`
    : `the database is unavailable (${reason}); retry later`;
  return new ConnectError(message, Code.Unavailable, undefined, undefined, error);
}
