import { Code, ConnectError } from "@connectrpc/connect";

/** What went wrong, for callers that branch on it. */
export type AglErrorCode =
  // ---- the agent SDK and the runner
  /** An emitter or a hook ran outside any attempt. */
  | "no_active_attempt"
  /** A value the caller gave is malformed or out of range. */
  | "invalid_argument"
  /** The agent asked for a resource the attempt's resources do not hold. */
  | "resource_missing"
  /** More than one resource fits where the agent asked for one. */
  | "resource_ambiguous"
  /** A prompt template did not render. */
  | "template_render"
  /** The agent returned something that is not a reward, nothing, or spans. */
  | "invalid_result"
  /** The agent module could not be loaded. */
  | "agent_load"
  // ---- APO
  /** APO's options are malformed or contradict each other. */
  | "invalid_options"
  /** A dataset APO needs is empty. */
  | "empty_dataset"
  /** A template names a variable the dataset does not provide. */
  | "unknown_placeholder"
  /** The optimizer LLM could not be reached. */
  | "optimizer_unreachable"
  /** The optimizer LLM answered with an error or with nothing usable. */
  | "optimizer_failed"
  /** A resumed run's record does not match its options. */
  | "resume_mismatch"
  /** Too many of a round's rollouts failed to score the candidates. */
  | "rollouts_failed"
  // ---- anywhere
  /** The caller's signal aborted the work. */
  | "aborted"
  /** The store (or another service) could not be reached; trying again later may work. */
  | "unavailable"
  /** A call ran past its deadline. */
  | "deadline_exceeded"
  /** The store does not know the id. */
  | "not_found"
  /** The store refused the change in the item's current state. */
  | "failed_precondition"
  /** A size or count limit was hit. */
  | "resource_exhausted"
  /** A bearer token is missing or wrong. */
  | "unauthenticated"
  /** Anything else: a bug, or an error of unknown origin. */
  | "internal";

/** gRPC codes as agl codes; codes missing here are `internal`. */
const fromConnectCode: Partial<Record<Code, AglErrorCode>> = {
  [Code.Canceled]: "aborted",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.OutOfRange]: "invalid_argument",
  [Code.NotFound]: "not_found",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.PermissionDenied]: "unauthenticated",
  [Code.Unavailable]: "unavailable",
  [Code.DeadlineExceeded]: "deadline_exceeded",
};

/** agl's one error type: a code to branch on and a message a person can act on. */
export class AglError extends Error {
  override readonly name = "AglError";
  constructor(
    readonly code: AglErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /**
   * Turns anything thrown into an AglError (kept as is when it already is one): an `AbortError` (an `Error` or a
   * `DOMException` of that name) becomes `aborted`, a `TimeoutError` `deadline_exceeded`, a `ConnectError` the code
   * its gRPC code maps to, anything else `fallback` (default `internal`). The original is kept as `cause`.
   */
  static from(error: unknown, fallback: AglErrorCode = "internal"): AglError {
    if (error instanceof AglError) return error;
    if (error instanceof ConnectError) return new AglError(fromConnectCode[error.code] ?? fallback, error.rawMessage, { cause: error });
    const name = error instanceof Error || error instanceof DOMException ? error.name : undefined;
    const message = error instanceof Error || error instanceof DOMException ? error.message : String(error);
    if (name === "AbortError") return new AglError("aborted", message, { cause: error });
    if (name === "TimeoutError") return new AglError("deadline_exceeded", message, { cause: error });
    return new AglError(fallback, message, { cause: error });
  }
}

/** A plain, cloneable description of an error (type, message, stack). */
export interface ErrorInfo {
  type: string;
  message: string;
  stack?: string;
}

/** Describes anything thrown as {@link ErrorInfo}. */
export function errorInfo(error: unknown): ErrorInfo {
  if (error instanceof Error) {
    const info: ErrorInfo = { type: error.name || error.constructor.name, message: error.message };
    if (error.stack) info.stack = error.stack;
    return info;
  }
  return { type: typeof error, message: String(error) };
}
