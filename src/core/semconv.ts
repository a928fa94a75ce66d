/**
 * Span names and attribute keys agl agrees on across the proxy, the tracer hooks, the emitters, the
 * runner, OTLP ingest and the adapters.
 *
 * LLM calls use the OpenTelemetry `gen_ai.*` conventions plus agl's own `agl.llm.*` keys for what the conventions lack:
 * the exact token ids and logprobs the engine sampled, the raw request and response bodies, and which resources
 * version served the call. Anything that records an LLM call (the proxy, the openai `fetch` wrapper, the OpenAI Agents
 * JS processor, the Vercel AI SDK integration, the LangChain.js handler) sets {@link AGL_LLM_SOURCE} so the adapters
 * know what they read. Rewards, messages and other emitter spans keep Agent Lightning v0.3's names (reference §6.4).
 *
 * Value types: token ids are `int_array`, logprobs `double_array`, JSON documents strings.
 * @module
 */

// ---- OpenTelemetry gen_ai conventions (the subset agl reads and writes) -----------------------------------------

/** `chat`, `text_completion`, `invoke_agent`, `execute_tool`, … */
export const GEN_AI_OPERATION_NAME = "gen_ai.operation.name";
export const GEN_AI_PROVIDER_NAME = "gen_ai.provider.name";
/** Older instrumentations' name for the provider. */
export const GEN_AI_SYSTEM = "gen_ai.system";
export const GEN_AI_REQUEST_MODEL = "gen_ai.request.model";
export const GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature";
export const GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p";
export const GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens";
export const GEN_AI_RESPONSE_ID = "gen_ai.response.id";
export const GEN_AI_RESPONSE_MODEL = "gen_ai.response.model";
/** string_array, one per choice. */
export const GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons";
export const GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens";
export const GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens";
/** JSON: the input messages (OpenAI chat format or the semconv `parts` format; adapters read both). */
export const GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages";
/** JSON: the output messages, same formats as the input. */
export const GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages";
/** JSON: the tool definitions offered to the model. */
export const GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions";
export const GEN_AI_AGENT_NAME = "gen_ai.agent.name";
export const GEN_AI_TOOL_NAME = "gen_ai.tool.name";
export const GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id";
export const ERROR_TYPE = "error.type";

/** Values of {@link GEN_AI_OPERATION_NAME} that mark an LLM call. */
export const LLM_OPERATIONS: readonly string[] = ["chat", "text_completion", "generate_content"];
export const OPERATION_INVOKE_AGENT = "invoke_agent";
export const OPERATION_EXECUTE_TOOL = "execute_tool";

// ---- agl's LLM-call keys -------------------------------------------------------------------------------------------

/** Who recorded the call: one of {@link LlmSource}. Adapters prefer the most exact source when one call is seen twice. */
export const AGL_LLM_SOURCE = "agl.llm.source";
/** int_array: the prompt token ids exactly as the engine saw them (vLLM `prompt_token_ids`). */
export const AGL_LLM_PROMPT_TOKEN_IDS = "agl.llm.prompt_token_ids";
/** int_array: the sampled token ids of choice 0 (vLLM `choices[0].token_ids`), stop token included when sent. */
export const AGL_LLM_RESPONSE_TOKEN_IDS = "agl.llm.response_token_ids";
/** double_array: the logprob of each sampled token of choice 0, aligned with the response ids. */
export const AGL_LLM_LOGPROBS = "agl.llm.logprobs";
/**
 * JSON: the chat completions or completions request body the client sent (before the proxy added `return_token_ids`/
 * `logprobs`); for a Responses or Messages call the proxy served, the chat completions request it stands for.
 */
export const AGL_LLM_REQUEST = "agl.llm.request";
/** JSON: the response body (for a stream, the completion assembled from its chunks). */
export const AGL_LLM_RESPONSE = "agl.llm.response";
/** bool: whether the call streamed. */
export const AGL_LLM_STREAM = "agl.llm.stream";
/** Resources snapshot id whose LLM served the call (the proxy's backend source), when known. */
export const AGL_LLM_RESOURCES_ID = "agl.llm.resources_id";
/** int: the version of that snapshot. */
export const AGL_LLM_RESOURCES_VERSION = "agl.llm.resources_version";
/** The engine endpoint that served the call. */
export const AGL_LLM_BACKEND = "agl.llm.backend";
/** double: milliseconds from the request to the end of the response. */
export const AGL_LLM_LATENCY_MS = "agl.llm.latency_ms";
/** double: milliseconds from the request to the first response byte from the engine. */
export const AGL_LLM_TTFT_MS = "agl.llm.time_to_first_byte_ms";
/** int: tries made upstream (1 when the first one answered). */
export const AGL_LLM_UPSTREAM_TRIES = "agl.llm.upstream_tries";
/** int: HTTP status the client received. */
export const AGL_LLM_HTTP_STATUS = "agl.llm.http_status";

/** The API the client called (`chat`, `completions`, `responses`, `messages`); the proxy records it. */
export const AGL_LLM_API = "agl.llm.api";
/** JSON: the client's own body when it called another API than the engine's (`agl.llm.request` is then its translation). */
export const AGL_LLM_CLIENT_REQUEST = "agl.llm.client_request";
/** Token-in mode: `first` (rendered by the engine), `extended` (a token-id prompt) or `fallback` (sent as text). */
export const AGL_LLM_TOKEN_IN = "agl.llm.token_in";
/** Why a token-in call fell back to text. */
export const AGL_LLM_TOKEN_IN_FALLBACK = "agl.llm.token_in.fallback_reason";

/** Values of {@link AGL_LLM_SOURCE}. */
export const LlmSource = {
  /** The agl LLM proxy (token ids straight from the engine). */
  proxy: "proxy",
  /** The `fetch` wrapper of the openai client (raw bodies, token ids when the engine returned them). */
  openaiFetch: "openai-fetch",
  /** The OpenAI Agents JS trace processor. */
  openaiAgents: "openai-agents",
  /** The Vercel AI SDK telemetry integration. */
  vercelAi: "vercel-ai",
  /** The LangChain.js callback handler. */
  langchain: "langchain",
} as const;
export type LlmSource = (typeof LlmSource)[keyof typeof LlmSource];

// ---- Agent Lightning v0.3 names (reference §6.4), kept so traces stay comparable ---------------------------------

export const AGL_ANNOTATION = "agentlightning.annotation";
export const AGL_MESSAGE = "agentlightning.message";
export const AGL_OBJECT = "agentlightning.object";
export const AGL_EXCEPTION = "agentlightning.exception";
export const AGL_OPERATION = "agentlightning.operation";
export const AGL_REWARD = "agentlightning.reward";
/** Name of the synthetic spans adapters create (lost parents, the virtual root). */
export const AGL_VIRTUAL = "agentlightning.virtual";
/** Prefix of reward dimensions: `agentlightning.reward.{i}.name` / `.value`; dimension 0 is the primary one. */
export const AGL_REWARD_PREFIX = "agentlightning.reward";
/** Optional text feedback of a reward (APO's textual gradient reads it). */
export const AGL_REWARD_FEEDBACK = "agentlightning.reward.feedback";
export const AGL_MESSAGE_BODY = "agentlightning.message.body";
export const AGL_OPERATION_NAME = "agentlightning.operation.name";

/** `agentlightning.reward.{index}.value`. */
export const rewardValueKey = (index: number) => `${AGL_REWARD_PREFIX}.${index}.value`;
/** `agentlightning.reward.{index}.name`. */
export const rewardNameKey = (index: number) => `${AGL_REWARD_PREFIX}.${index}.name`;

// ---- Names only producers write (the emitters, the runner, OTLP ingest) -----------------------------------------

/** Resource (and span) attributes naming the attempt a span belongs to; OTLP ingest reads them. */
export const AGL_ROLLOUT_ID_KEY = "agentlightning.rollout_id";
export const AGL_ATTEMPT_ID_KEY = "agentlightning.attempt_id";
export const AGL_SPAN_SEQUENCE_ID_KEY = "agentlightning.span_sequence_id";
export const AGL_TRACER_NAME_KEY = "agentlightning.tracer.name";

/** The root span the runner opens around each attempt (agl's addition; its children are the agent's spans). */
export const AGL_ROLLOUT_SPAN = "agentlightning.rollout";
/** Attributes of the root span. */
export const AGL_ROLLOUT_MODE_KEY = "agentlightning.rollout.mode";
export const AGL_ATTEMPT_SEQUENCE_KEY = "agentlightning.attempt.sequence_id";
export const AGL_AGENT_NAME_KEY = "agent.name";

export const AGL_OBJECT_TYPE = "agentlightning.object.type";
export const AGL_OBJECT_LITERAL = "agentlightning.object.literal";
export const AGL_OBJECT_JSON = "agentlightning.object.json";
export const AGL_LINK_PREFIX = "agentlightning.link";
export const AGL_TAG_PREFIX = "agentlightning.tag";
export const AGL_OPERATION_INPUT = "agentlightning.operation.input";
export const AGL_OPERATION_OUTPUT = "agentlightning.operation.output";

/** OpenTelemetry exception conventions, used by `emitException`. */
export const EXCEPTION_TYPE = "exception.type";
export const EXCEPTION_MESSAGE = "exception.message";
export const EXCEPTION_ESCAPED = "exception.escaped";
export const EXCEPTION_STACKTRACE = "exception.stacktrace";

// ---- Framework-native shapes the adapters also recognise ---------------------------------------------------------

/** OpenAI Agents JS span type (`agent`, `generation`, `function`, …) when its spans are recorded natively. */
export const OPENAI_AGENTS_SPAN_TYPE = "openai.agents.span_type";
/** Vercel AI SDK native OTel attributes (`experimental_telemetry`). */
export const AI_SDK_PROMPT_MESSAGES = "ai.prompt.messages";
export const AI_SDK_RESPONSE_TEXT = "ai.response.text";
export const AI_SDK_RESPONSE_TOOL_CALLS = "ai.response.toolCalls";
export const AI_SDK_RESPONSE_ID = "ai.response.id";
export const AI_SDK_MODEL_ID = "ai.model.id";
export const AI_SDK_FUNCTION_ID = "ai.telemetry.functionId";
/** LangChain run type (`llm`, `chat_model`, `chain`, `tool`) and chain type (agent name, as in reference §7.1.2). */
export const LANGCHAIN_RUN_TYPE = "langchain.run_type";
export const LANGCHAIN_CHAIN_TYPE = "langchain.chain.type";
