import { AglError } from "../../core/errors.js";
import { backoffMs, withRetries } from "../../core/retry.js";

/** A chat message sent to the optimizer LLM. */
export interface OptimizerMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Options of {@link createOptimizerClient}. */
export interface OptimizerClientOptions {
  /** OpenAI-compatible base URL, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey?: string;
  /** Per request. Default 120 s. */
  timeoutMs?: number;
  /** Tries per call on network errors, 429 and 5xx. Default 3. */
  maxTries?: number;
  /** Replaceable for tests of retries; defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** One answer: its text and the tokens it cost. */
export interface OptimizerAnswer {
  text: string;
  /** Prompt + completion tokens. */
  tokens: number;
  /** Prompt tokens as the server counted them; undefined when it sent no `usage` (then `tokens` is estimated). */
  promptTokens: number | undefined;
}

/** One chat-completions request. */
export interface OptimizerRequest {
  model: string;
  messages: OptimizerMessage[];
  temperature?: number;
  maxCompletionTokens?: number;
}

/** The optimizer LLM: any OpenAI-compatible chat-completions endpoint. */
export interface OptimizerClient {
  readonly baseUrl: string;
  complete(request: OptimizerRequest, signal?: AbortSignal): Promise<OptimizerAnswer>;
  /** Fails early with a clear error when the endpoint is unreachable or refuses the key; warns of unknown models. */
  preflight(models: readonly string[]): Promise<string[]>;
}

/** Creates a client for the optimizer LLM. */
export function createOptimizerClient(options: OptimizerClientOptions): OptimizerClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  const where = `the optimizer LLM at ${baseUrl}`;

  const send = async (path: string, init: RequestInit, signal?: AbortSignal): Promise<Response> => {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      return await doFetch(`${baseUrl}${path}`, { ...init, headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    } catch (error) {
      if (signal?.aborted) throw new AglError("aborted", "the run was aborted", { cause: error });
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const detail = cause?.code ?? cause?.message ?? (error as Error).message;
      const why = timeout.aborted ? `no answer within ${timeoutMs} ms` : detail === "bad port" ? "fetch refuses to use that port" : detail;
      throw new AglError(
        "optimizer_unreachable",
        `cannot reach ${where} (${why}); check the base URL (--optimizer-base-url or OPENAI_BASE_URL)`,
        { cause: error },
      );
    }
  };

  return {
    baseUrl,
    async complete(request, signal) {
      const body: Record<string, unknown> = { model: request.model, messages: request.messages };
      if (request.temperature !== undefined) body.temperature = request.temperature;
      if (request.maxCompletionTokens !== undefined) body.max_completion_tokens = request.maxCompletionTokens;
      const answer = withRetries(
        async () => {
          const response = await send("/chat/completions", { method: "POST", body: JSON.stringify(body) }, signal);
          const text = await response.text();
          if (response.ok) return parseAnswer(text, request, where);
          const hint =
            response.status === 401 || response.status === 403
              ? "; check the API key (--optimizer-api-key or OPENAI_API_KEY)"
              : response.status === 404
                ? `; check the base URL and the model name "${request.model}"`
                : "";
          throw new AglError(
            "optimizer_failed",
            `${where} answered ${response.status} for model "${request.model}": ${errorText(text)}${hint}`,
            { cause: response },
          );
        },
        {
          tries: options.maxTries ?? 3,
          retryable: (error) => {
            const failed = answerOf(error);
            return (
              (error as AglError).code === "optimizer_unreachable" ||
              (failed !== undefined && (failed.status === 429 || failed.status >= 500))
            );
          },
          delayMs: (n, error) => backoffMs(n, 250, 10_000, answerOf(error)?.headers.get("retry-after")),
          signal,
        },
      );
      // A wait for the next try ends early when the run is aborted, and the run's callers look for `aborted`.
      return answer.catch((error: unknown) => {
        throw signal?.aborted && (error as AglError).code !== "aborted"
          ? new AglError("aborted", "the run was aborted", { cause: error })
          : error;
      });
    },
    async preflight(models) {
      const response = await send("/models", { method: "GET" });
      if (response.status === 401 || response.status === 403) {
        throw new AglError(
          "optimizer_failed",
          `${where} refused the API key (${response.status}); check --optimizer-api-key or OPENAI_API_KEY`,
        );
      }
      if (!response.ok) return [];
      const listed = (JSON.parse((await response.text().catch(() => "{}")) || "{}") as { data?: { id?: string }[] }).data;
      if (!Array.isArray(listed) || listed.length === 0) return [];
      const ids = new Set(listed.map((m) => m.id));
      return [...new Set(models)]
        .filter((m) => !ids.has(m))
        .map((m) => `${where} does not list model "${m}" (it lists ${[...ids].slice(0, 8).join(", ")}${ids.size > 8 ? ", …" : ""})`);
    },
  };
}

function parseAnswer(raw: string, request: OptimizerRequest, where: string): OptimizerAnswer {
  let json: { choices?: { message?: { content?: unknown } }[]; usage?: { total_tokens?: number; prompt_tokens?: number } };
  try {
    json = JSON.parse(raw);
  } catch {
    throw new AglError("optimizer_failed", `${where} sent a body that is not JSON: ${raw.slice(0, 200)}`);
  }
  const content = json.choices?.[0]?.message?.content;
  const text = typeof content === "string" ? content : "";
  const total = json.usage?.total_tokens;
  const prompt = json.usage?.prompt_tokens;
  if (typeof total === "number") return { text, tokens: total, promptTokens: typeof prompt === "number" ? prompt : undefined };
  const chars = request.messages.reduce((n, m) => n + m.content.length, 0);
  return { text, tokens: Math.ceil(chars / 4) + Math.ceil(text.length / 4), promptTokens: undefined };
}

/** The HTTP answer an `optimizer_failed` error carries as its cause. */
const answerOf = (error: unknown) => ((error as AglError).cause instanceof Response ? ((error as AglError).cause as Response) : undefined);

function errorText(body: string): string {
  try {
    const message = (JSON.parse(body) as { error?: { message?: string } }).error?.message;
    if (message) return message;
  } catch {}
  return body.slice(0, 300) || "(empty body)";
}
