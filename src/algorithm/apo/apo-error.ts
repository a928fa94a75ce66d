/** What went wrong in an APO run, for callers that branch on it. */
export type ApoErrorCode =
  | "invalid_options"
  | "empty_dataset"
  | "unknown_placeholder"
  | "optimizer_unreachable"
  | "optimizer_failed"
  | "resume_mismatch"
  | "rollouts_failed"
  | "aborted";

/** APO's one error type: a code and a message a person can act on. */
export class ApoError extends Error {
  override readonly name = "ApoError";
  constructor(
    readonly code: ApoErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Wraps anything thrown into an ApoError (kept as is when it already is one). */
  static from(error: unknown, code: ApoErrorCode = "invalid_options"): ApoError {
    if (error instanceof ApoError) return error;
    return new ApoError(code, error instanceof Error ? error.message : String(error), { cause: error });
  }
}
