import { createBoundedMap } from "./bounded-map.js";

/** An OpenAI-compatible engine the proxy forwards to. */
export interface Backend {
  /** Base URL as an OpenAI client takes it, e.g. `http://10.0.0.5:8000/v1`; the proxy appends `/chat/completions`. */
  endpoint: string;
  /** The model name the engine serves. */
  model: string;
  /** Sent upstream as `authorization: Bearer …`; the client's own credentials never are. */
  apiKey?: string;
  /** A name for logs and spans (the resource name when it came from the store). */
  name?: string;
  /** Token-in mode for this engine's calls (its resource's `sampling_parameters.agl_token_in`); unset: the proxy's. */
  tokenIn?: boolean;
}

/** The backends in force, and which resources version they came from. */
export interface BackendSet {
  backends: readonly Backend[];
  /** Empty when the backends were given as flags. */
  resourcesId: string;
  resourcesVersion: number;
}

/** 32-bit FNV-1a: fast, stable across processes, good enough to spread keys. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // Final avalanche so keys differing only at the end still spread.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

/**
 * Backends in the order to try them. With a `key` (the rollout id) the order is rendezvous hashing: every call of a
 * rollout goes to the same engine (its KV prefix cache stays warm), and adding or removing an engine only moves the
 * rollouts that hashed to it. Without a key, calls rotate from `rotation`.
 */
export function routeOrder(backends: readonly Backend[], key: string | undefined, rotation: number): Backend[] {
  if (backends.length <= 1) return [...backends];
  if (key === undefined) {
    const start = rotation % backends.length;
    return [...backends.slice(start), ...backends.slice(0, start)];
  }
  return backends
    .map((backend) => ({ backend, score: fnv1a(`${key}\0${backend.endpoint}`) }))
    .sort((a, b) => b.score - a.score)
    .map((x) => x.backend);
}

/**
 * The backends that can serve `model`: those serving it by name; otherwise, when every backend serves one and the
 * same model, all of them (the request's model name is then rewritten to it); otherwise none.
 */
export function backendsForModel(backends: readonly Backend[], model: string | undefined): { backends: Backend[]; rewrite?: string } {
  const exact = backends.filter((b) => b.model === model);
  if (exact.length > 0) return { backends: exact };
  const models = new Set(backends.map((b) => b.model));
  const only = backends[0]?.model;
  if (models.size === 1) return only ? { backends: [...backends], rewrite: only } : { backends: [...backends] };
  return { backends: [] };
}

/** Engine URLs made so far (parsing one took about 2 % of the proxy's CPU a call); the oldest go past 256. */
const upstreamUrls = createBoundedMap<URL>(256, 256);

/**
 * Joins an OpenAI base URL and an API path (`/chat/completions`). Every call to the same place gets the same URL
 * object: read it, never change it.
 */
export function upstreamUrl(endpoint: string, path: string): URL {
  const key = `${path} ${endpoint}`;
  let url = upstreamUrls.get(key);
  if (url === undefined) {
    url = new URL(endpoint.replace(/\/+$/, "") + path);
    upstreamUrls.set(key, url, 1);
  }
  return url;
}
