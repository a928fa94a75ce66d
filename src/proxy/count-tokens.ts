import type * as http from "node:http";
import { type BackendSet, backendsForModel } from "./backends.js";
import { ApiRequestError, type ClientApi, errorBody, isJson } from "./client-api.js";
import { engineTokenize } from "./engine-tokenize.js";
import { BodyTooLargeError, readRequestBody, sendJson } from "./http-io.js";
import type { Upstream } from "./upstream.js";

/** What {@link handleCountTokens} works with. */
export interface CountTokensDeps {
  messages: ClientApi;
  upstream: Upstream;
  backends(): Promise<BackendSet | undefined>;
  maxBodyBytes: number;
}

/**
 * `POST /v1/messages/count_tokens` (Anthropic's): the request's messages, system and tools through the engine's chat
 * template (its `/tokenize`), answered `{"input_tokens": n}`; the engine is not asked to generate and nothing is
 * recorded. Errors in the Anthropic shape; 501 when the engine has no `/tokenize`.
 */
export async function handleCountTokens(deps: CountTokensDeps, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const fail = (status: number, message: string) => sendJson(res, status, errorBody("messages", status, "invalid_request", message));
  let body: unknown;
  try {
    body = JSON.parse((await readRequestBody(req, deps.maxBodyBytes)).toString("utf8"));
  } catch (error) {
    if (error instanceof BodyTooLargeError) return fail(413, error.message);
    return fail(400, `the request body is not valid JSON: ${(error as Error).message}`);
  }
  if (!isJson(body)) return fail(400, "the request body must be a JSON object");
  let chat: Record<string, unknown>;
  try {
    // Counting needs no max_tokens; the mapping of everything else is the one of /v1/messages.
    chat = deps.messages.toChat({ ...body, max_tokens: 1 });
  } catch (error) {
    if (error instanceof ApiRequestError) return fail(400, error.message);
    throw error;
  }
  const set = await deps.backends();
  if (!set) return fail(503, "no engine is configured yet: publish an LLM resource or pass --backend");
  const [backend] = backendsForModel(set.backends, typeof chat.model === "string" ? chat.model : undefined).backends;
  if (!backend) return fail(404, `model ${JSON.stringify(chat.model)} is not served here`);
  const abort = new AbortController();
  res.on("close", () => abort.abort());
  let counted: Awaited<ReturnType<typeof engineTokenize>>;
  try {
    const tools = chat.tools ? { tools: chat.tools } : {};
    counted = await engineTokenize(
      deps.upstream,
      backend,
      { messages: chat.messages, add_generation_prompt: true, ...tools },
      abort.signal,
    );
  } catch (error) {
    return fail(502, `the engine did not answer: ${(error as Error).message}`);
  }
  if (!counted.tokens) {
    return counted.status === 404
      ? fail(501, "the engine has no /tokenize to count tokens with")
      : fail(502, `the engine's /tokenize answered ${counted.status}`);
  }
  sendJson(res, 200, { input_tokens: counted.tokens.length });
}
