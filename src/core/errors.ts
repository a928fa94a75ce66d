/** What went wrong, for callers that branch on it. */
export type AglErrorCode =
  | "no_active_attempt"
  | "invalid_argument"
  | "resource_missing"
  | "resource_ambiguous"
  | "template_render"
  | "invalid_result"
  | "agent_load"
  | "aborted";

/** The agent SDK's one error type: a code and a message a person can act on. */
export class AglError extends Error {
  override readonly name = "AglError";
  constructor(
    readonly code: AglErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Wraps anything thrown into an AglError (kept as is when it already is one). */
  static from(error: unknown, code: AglErrorCode = "invalid_argument"): AglError {
    if (error instanceof AglError) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new AglError(code, message, { cause: error });
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
