import type { Span } from "../gen/agl/v1/types_pb.js";
import { attrString } from "./attributes.js";
import {
  AGL_LLM_SOURCE,
  AI_SDK_FUNCTION_ID,
  GEN_AI_AGENT_NAME,
  GEN_AI_OPERATION_NAME,
  LANGCHAIN_CHAIN_TYPE,
  LANGCHAIN_RUN_TYPE,
  LLM_OPERATIONS,
  LlmSource,
  OPENAI_AGENTS_SPAN_TYPE,
  OPERATION_EXECUTE_TOOL,
} from "../core/semconv.js";

/** One row of the adapter table: how to tell that a span records an LLM call, and how exact that record is. */
export interface LlmCallRecognizer {
  /** Reported as the call's source. */
  readonly name: string;
  /** Higher wins when one call was recorded twice (the proxy saw the engine's own ids; a framework hook did not). */
  readonly priority: number;
  matches(span: Span): boolean;
}

const sourcePriority: Record<string, number> = {
  [LlmSource.proxy]: 30,
  [LlmSource.openaiFetch]: 20,
};

/** Spans that name their recorder with `agl.llm.source`: the proxy and every agl tracer hook. */
const aglSource: LlmCallRecognizer = {
  name: "agl",
  priority: 10,
  matches: (span) => attrString(span.attributes, AGL_LLM_SOURCE) !== undefined,
};

/** Any OpenTelemetry gen_ai inference span (`gen_ai.operation.name` = chat, text_completion, generate_content). */
const genAi: LlmCallRecognizer = {
  name: "gen_ai",
  priority: 5,
  matches: (span) => {
    const op = attrString(span.attributes, GEN_AI_OPERATION_NAME);
    return op !== undefined && LLM_OPERATIONS.includes(op);
  },
};

/** The Vercel AI SDK's own telemetry: `ai.generateText.doGenerate`, `ai.streamText.doStream`, `ai.generateObject…`. */
const vercelAiNative: LlmCallRecognizer = {
  name: LlmSource.vercelAi,
  priority: 4,
  matches: (span) => span.name.startsWith("ai.") && (span.name.endsWith(".doGenerate") || span.name.endsWith(".doStream")),
};

/** OpenAI Agents JS spans recorded with their span type: `generation` (chat completions) and `response` (Responses). */
const openaiAgentsNative: LlmCallRecognizer = {
  name: LlmSource.openaiAgents,
  priority: 4,
  matches: (span) => {
    const type = attrString(span.attributes, OPENAI_AGENTS_SPAN_TYPE);
    return type === "generation" || type === "response";
  },
};

/** LangChain.js runs recorded with their run type. */
const langchainNative: LlmCallRecognizer = {
  name: LlmSource.langchain,
  priority: 4,
  matches: (span) => {
    const type = attrString(span.attributes, LANGCHAIN_RUN_TYPE);
    return type === "llm" || type === "chat_model";
  },
};

/** The adapter table, most specific first. */
export const defaultRecognizers: readonly LlmCallRecognizer[] = [aglSource, genAi, vercelAiNative, openaiAgentsNative, langchainNative];

/** What a recognizer says about a span that records an LLM call. */
export interface RecognizedCall {
  source: string;
  priority: number;
}

/** The first row of `table` matching `span`, or undefined when the span is no LLM call. */
export function recognizeLlmCall(span: Span, table: readonly LlmCallRecognizer[] = defaultRecognizers): RecognizedCall | undefined {
  for (const row of table) {
    if (!row.matches(span)) continue;
    if (row === aglSource) {
      const source = attrString(span.attributes, AGL_LLM_SOURCE) as string;
      return { source, priority: sourcePriority[source] ?? row.priority };
    }
    return { source: row.name, priority: row.priority };
  }
  return undefined;
}

/**
 * The agent a span stands for, or undefined. Checked in order: `gen_ai.agent.name` on a span that is no LLM or tool
 * call, OpenAI Agents `agent` spans, `agent.name` (Agents SDK for Python, reference §7.1.2), LangChain's chain type,
 * and the Vercel AI SDK's `functionId` on its outer `ai.generateText`/`ai.streamText` spans.
 */
export function agentNameOf(span: Span): string | undefined {
  const a = span.attributes;
  const op = attrString(a, GEN_AI_OPERATION_NAME);
  const isCall = op !== undefined && (LLM_OPERATIONS.includes(op) || op === OPERATION_EXECUTE_TOOL);
  if (!isCall) {
    const name = attrString(a, GEN_AI_AGENT_NAME);
    if (name) return name;
  }
  if (attrString(a, OPENAI_AGENTS_SPAN_TYPE) === "agent") return attrString(a, "openai.agents.agent.name") ?? span.name;
  const legacy = attrString(a, "agent.name");
  if (legacy) return legacy;
  const chain = attrString(a, LANGCHAIN_CHAIN_TYPE);
  if (chain) return chain;
  if (span.name === "ai.generateText" || span.name === "ai.streamText") return attrString(a, AI_SDK_FUNCTION_ID);
  return undefined;
}
