/**
 * The LLM proxy (`agl/proxy`), for trainers that serve a policy: an OpenAI-compatible endpoint in front of the
 * inference engines that scopes every call to its attempt, records the token ids the engine sampled as spans, and
 * pauses or drains calls while weights are swapped.
 *
 * @example
 * ```ts
 * import { createLlmProxy } from "agl/proxy";
 * const proxy = createLlmProxy({ store, backends: [{ endpoint: "http://127.0.0.1:8000/v1", model: "policy" }] });
 * ```
 * @module
 */
export { createLlmProxy } from "./proxy/llm-proxy.js";
export type { LlmProxy, LlmProxyOptions, ProxyStatus } from "./proxy/llm-proxy.js";
export type { Backend } from "./proxy/backends.js";
export type { PauseOptions, PauseMode } from "./proxy/pause-gate.js";

/** Attempt-scoped URLs: what a runner gives an agent so the proxy knows which attempt a call belongs to. */
export { proxyBaseUrl, bindResource, bindResources } from "./proxy/binding.js";
