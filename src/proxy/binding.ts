import { create } from "@bufbuild/protobuf";
import { type LLM, LLMSchema, type Resource } from "../gen/agl/v1/types_pb.js";

/**
 * The base URL an agent uses for one attempt: `{endpoint without a trailing /v1}/rollout/{rollout_id}/attempt/{attempt_id}/v1`.
 * Every call made there is recorded by the proxy as a span of that attempt.
 *
 * @example proxyBaseUrl("http://127.0.0.1:4747/v1", "ro-1a2b3c4d5e6f", "at-0a1b2c3d")
 * // "http://127.0.0.1:4747/rollout/ro-1a2b3c4d5e6f/attempt/at-0a1b2c3d/v1"
 */
export function proxyBaseUrl(endpoint: string, rolloutId: string, attemptId: string): string {
  if (!rolloutId || !attemptId) throw new Error("binding a proxy endpoint needs both a rollout id and an attempt id");
  let base = endpoint.replace(/\/+$/, "");
  if (base.endsWith("/v1")) base = base.slice(0, -3);
  return `${base}/rollout/${encodeURIComponent(rolloutId)}/attempt/${encodeURIComponent(attemptId)}/v1`;
}

/**
 * Binds a resource to an attempt: a `proxy_llm` becomes a plain `llm` whose endpoint is the attempt's proxy URL
 * (model, key and sampling parameters kept); any other resource is returned unchanged. A runner applies it to every
 * resource before handing them to the agent.
 */
export function bindResource(resource: Resource, rolloutId: string, attemptId: string): Resource {
  if (resource.kind.case !== "proxyLlm") return resource;
  const llm = resource.kind.value;
  const bound: LLM = create(LLMSchema, { ...llm, endpoint: proxyBaseUrl(llm.endpoint, rolloutId, attemptId) });
  return { ...resource, kind: { case: "llm", value: bound } };
}

/** {@link bindResource} over a whole snapshot's resources map. */
export function bindResources(resources: Record<string, Resource>, rolloutId: string, attemptId: string): Record<string, Resource> {
  const out: Record<string, Resource> = {};
  for (const [name, resource] of Object.entries(resources)) out[name] = bindResource(resource, rolloutId, attemptId);
  return out;
}
