import type { Backend } from "./backends.js";
import type { Json } from "./client-api.js";
import { readBody, type Upstream } from "./upstream.js";

/** What an engine's `/tokenize` answered: its status, and the token ids when it gave them. */
export interface Tokenized {
  status: number;
  tokens: number[] | undefined;
}

/**
 * Asks an engine's `/tokenize` (vLLM's, next to its `/v1`): messages through its chat template (`messages`,
 * `tools`, `add_generation_prompt`) or a text `prompt`. Throws only when the engine cannot be reached.
 */
export async function engineTokenize(upstream: Upstream, backend: Backend, body: Json, signal: AbortSignal): Promise<Tokenized> {
  const url = new URL(`${backend.endpoint.replace(/\/+$/, "").replace(/\/v1$/, "")}/tokenize`);
  const res = await upstream.post(url, Buffer.from(JSON.stringify({ model: backend.model, ...body })), backend.apiKey, signal);
  const text = await readBody(res.body);
  const { status } = res;
  if (status >= 400) return { status, tokens: undefined };
  try {
    const tokens = (JSON.parse(text.toString("utf8")) as { tokens?: unknown }).tokens;
    return { status, tokens: Array.isArray(tokens) && tokens.every((t) => Number.isInteger(t)) ? (tokens as number[]) : undefined };
  } catch {
    return { status, tokens: undefined };
  }
}
