import { AglError } from "../core/errors.js";

/**
 * The URL of the LLM proxy for one attempt: `{endpoint without a trailing /v1}/rollout/{rolloutId}/attempt/{attemptId}/v1`.
 * The proxy records every call made there as a span of that attempt.
 *
 * @example bindProxyEndpoint("http://proxy:4000/v1", "ro-1", "at-2") // "http://proxy:4000/rollout/ro-1/attempt/at-2/v1"
 */
export function bindProxyEndpoint(endpoint: string, rolloutId: string, attemptId: string): string {
  if (!rolloutId || !attemptId) {
    throw new AglError("invalid_argument", "binding a proxy endpoint needs both a rollout id and an attempt id");
  }
  let base = endpoint.replace(/\/+$/, "");
  if (base.endsWith("/v1")) base = base.slice(0, -3);
  return `${base}/rollout/${encodeURIComponent(rolloutId)}/attempt/${encodeURIComponent(attemptId)}/v1`;
}
