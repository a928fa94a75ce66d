import { randomBytes } from "node:crypto";

/**
 * Makes a bench's spans of about `spanBytes` each (ids, a name and one text attribute), as the inits a store call
 * takes: `makeSpans(rolloutId, attemptId, count)`.
 */
export function spanMaker(spanBytes: number) {
  const payload = randomBytes(Math.max(0, spanBytes - 200) / 2).toString("hex");
  return (rolloutId: string, attemptId: string, count: number) => {
    // One random draw per batch, as a tracer's id generator would amortise it.
    const ids = randomBytes(24 * count).toString("hex");
    return Array.from({ length: count }, (_, i) => ({
      rolloutId,
      attemptId,
      spanId: ids.slice(48 * i, 48 * i + 16),
      traceId: ids.slice(48 * i + 16, 48 * i + 48),
      name: "llm.call",
      attributes: { payload: { value: { case: "stringValue" as const, value: payload } } },
    }));
  };
}
