import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { registerConfigureHook } from "@langchain/core/context";
import type { BaseMessage } from "@langchain/core/messages";
import type { LLMResult } from "@langchain/core/outputs";
import type { Serialized } from "@langchain/core/load/serializable";
import {
  AGL_LLM_SOURCE,
  GEN_AI_INPUT_MESSAGES,
  GEN_AI_OPERATION_NAME,
  GEN_AI_OUTPUT_MESSAGES,
  GEN_AI_PROVIDER_NAME,
  GEN_AI_REQUEST_MODEL,
  GEN_AI_REQUEST_TEMPERATURE,
  GEN_AI_RESPONSE_FINISH_REASONS,
  GEN_AI_RESPONSE_ID,
  GEN_AI_TOOL_CALL_ID,
  GEN_AI_TOOL_NAME,
  GEN_AI_USAGE_INPUT_TOKENS,
  GEN_AI_USAGE_OUTPUT_TOKENS,
  LANGCHAIN_RUN_TYPE,
  LlmSource,
} from "../../core/semconv.js";
import { type AttributeMap, attr, toJsonText } from "../attributes.js";
import { onAttemptEnter } from "../attempt-scope.js";
import { setTypedAttributes } from "../provider.js";
import { enrichFromFetchCapture, type HookSpan, startHookSpan } from "./hook-spans.js";

// LangChain hands callbacks untyped payloads whose fields vary by provider and version; each is checked where read.
// biome-ignore lint/suspicious/noExplicitAny: the payloads are untyped at their source (see above)
type Json = any;

// Runs in progress by LangChain run id; handlers are created per configured call, so the map is shared.
const runs = new Map<string, HookSpan & { model?: string }>();

const roleOf = (m: BaseMessage) => {
  const type = m.getType();
  return type === "human" ? "user" : type === "ai" ? "assistant" : type;
};
const toOpenAiMessage = (m: BaseMessage): Json => {
  const out: Json = { role: roleOf(m), content: m.content };
  const calls = (m as Json).tool_calls;
  if (Array.isArray(calls) && calls.length > 0) {
    out.tool_calls = calls.map((c: Json) => ({ id: c.id, type: "function", function: { name: c.name, arguments: toJsonText(c.args) } }));
  }
  if ((m as Json).tool_call_id) out.tool_call_id = (m as Json).tool_call_id;
  return out;
};

/**
 * A LangChain.js callback handler that records, inside a rollout, chat model and LLM calls as `chat {model}` spans
 * (gen_ai attributes, usage, and the token ids of the fetch wrapper's capture of the same call), tools as
 * `execute_tool {name}` and chains as `langchain.chain {name}`. {@link registerLangChainTracing} installs it for
 * every call; it can also be passed in `callbacks` explicitly.
 */
export class AglLangChainHandler extends BaseCallbackHandler {
  name = "agl_tracer";

  constructor() {
    // Awaited handlers run inside the caller's async context, where the attempt scope lives.
    super({ _awaitHandler: true });
  }

  private open(
    runId: string,
    parentRunId: string | undefined,
    name: string,
    attributes: AttributeMap,
    kind = SpanKind.INTERNAL,
    model?: string,
  ) {
    const hook = startHookSpan(name, attributes, { parent: parentRunId ? runs.get(parentRunId) : undefined, kind });
    if (hook) runs.set(runId, { ...hook, ...(model ? { model } : {}) });
  }

  private close(runId: string, attributes: AttributeMap = {}, error?: unknown) {
    const hook = runs.get(runId);
    if (!hook) return;
    runs.delete(runId);
    setTypedAttributes(hook.span, attributes);
    if (error !== undefined)
      hook.span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    hook.span.end();
  }

  private startModel(
    runId: string,
    parentRunId: string | undefined,
    runType: "chat_model" | "llm",
    input: Json,
    extra?: Record<string, unknown>,
    metadata?: Record<string, unknown>,
  ) {
    const params = (extra?.invocation_params ?? {}) as Json;
    const model = String(params.model ?? params.model_name ?? metadata?.ls_model_name ?? "unknown");
    const attributes: AttributeMap = {
      [AGL_LLM_SOURCE]: attr.str(LlmSource.langchain),
      [LANGCHAIN_RUN_TYPE]: attr.str(runType),
      [GEN_AI_OPERATION_NAME]: attr.str(runType === "chat_model" ? "chat" : "text_completion"),
      [GEN_AI_PROVIDER_NAME]: attr.str(String(metadata?.ls_provider ?? "langchain")),
      [GEN_AI_REQUEST_MODEL]: attr.str(model),
      [GEN_AI_INPUT_MESSAGES]: attr.json(input),
    };
    if (typeof params.temperature === "number") attributes[GEN_AI_REQUEST_TEMPERATURE] = attr.double(params.temperature);
    this.open(runId, parentRunId, `${runType === "chat_model" ? "chat" : "text_completion"} ${model}`, attributes, SpanKind.CLIENT, model);
  }

  override handleChatModelStart(
    _llm: Serialized,
    messages: BaseMessage[][],
    runId: string,
    parentRunId?: string,
    extra?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ) {
    this.startModel(runId, parentRunId, "chat_model", (messages[0] ?? []).map(toOpenAiMessage), extra, metadata);
  }

  override handleLLMStart(
    _llm: Serialized,
    prompts: string[],
    runId: string,
    parentRunId?: string,
    extra?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ) {
    this.startModel(
      runId,
      parentRunId,
      "llm",
      prompts.map((content) => ({ role: "user", content })),
      extra,
      metadata,
    );
  }

  override handleLLMEnd(output: LLMResult, runId: string) {
    const hook = runs.get(runId);
    if (!hook) return;
    const generation = output.generations[0]?.[0] as Json;
    const message = generation?.message;
    const attributes: AttributeMap = {};
    const responseId = message?.id ?? message?.response_metadata?.id;
    if (typeof responseId === "string") attributes[GEN_AI_RESPONSE_ID] = attr.str(responseId);
    const finish = generation?.generationInfo?.finish_reason ?? message?.response_metadata?.finish_reason;
    if (typeof finish === "string") attributes[GEN_AI_RESPONSE_FINISH_REASONS] = attr.strs([finish]);
    const usage = message?.usage_metadata ?? output.llmOutput?.tokenUsage;
    const input = usage?.input_tokens ?? usage?.promptTokens;
    const out = usage?.output_tokens ?? usage?.completionTokens;
    if (typeof input === "number") attributes[GEN_AI_USAGE_INPUT_TOKENS] = attr.int(input);
    if (typeof out === "number") attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = attr.int(out);
    attributes[GEN_AI_OUTPUT_MESSAGES] = attr.json(
      message
        ? [{ ...toOpenAiMessage(message), finish_reason: finish }]
        : [{ role: "assistant", content: generation?.text ?? "", finish_reason: finish }],
    );
    enrichFromFetchCapture(
      hook,
      { ...(typeof responseId === "string" ? { responseId } : {}), ...(hook.model ? { model: hook.model } : {}) },
      attributes,
    );
    this.close(runId, attributes);
  }

  override handleLLMError(error: Error, runId: string) {
    this.close(runId, {}, error);
  }

  override handleChainStart(
    _chain: Serialized,
    _inputs: Json,
    runId: string,
    parentRunId?: string,
    _tags?: string[],
    _metadata?: Record<string, unknown>,
    runType?: string,
    runName?: string,
  ) {
    this.open(runId, parentRunId, `langchain.chain ${runName ?? runType ?? "chain"}`, { [LANGCHAIN_RUN_TYPE]: attr.str("chain") });
  }

  override handleChainEnd(_outputs: Json, runId: string) {
    this.close(runId);
  }

  override handleChainError(error: Error, runId: string) {
    this.close(runId, {}, error);
  }

  override handleToolStart(
    tool: Serialized,
    input: string,
    runId: string,
    parentRunId?: string,
    _tags?: string[],
    _metadata?: Record<string, unknown>,
    runName?: string,
    toolCallId?: string,
  ) {
    const name = runName ?? String(tool.id?.at(-1) ?? "tool");
    this.open(runId, parentRunId, `execute_tool ${name}`, {
      [LANGCHAIN_RUN_TYPE]: attr.str("tool"),
      [GEN_AI_OPERATION_NAME]: attr.str("execute_tool"),
      [GEN_AI_TOOL_NAME]: attr.str(name),
      "gen_ai.tool.call.arguments": attr.str(input),
      ...(toolCallId ? { [GEN_AI_TOOL_CALL_ID]: attr.str(toolCallId) } : {}),
    });
  }

  override handleToolEnd(output: Json, runId: string) {
    const text = typeof output === "string" ? output : typeof output?.content === "string" ? output.content : toJsonText(output);
    this.close(runId, { "gen_ai.tool.call.result": attr.str(text) });
  }

  override handleToolError(error: Error, runId: string) {
    this.close(runId, {}, error);
  }
}

const envVar = "AGL_LANGCHAIN_TRACING";

/**
 * Makes LangChain.js add an {@link AglLangChainHandler} to every run, with no per-call `callbacks`: in the caller's
 * async context and in every attempt (LangChain keeps its configure hooks per async context).
 */
export function registerLangChainTracing(): void {
  if (process.env[envVar] === "true") return;
  process.env[envVar] = "true";
  const register = () => registerConfigureHook({ handlerClass: AglLangChainHandler as never, envVar });
  register();
  onAttemptEnter(register);
}
