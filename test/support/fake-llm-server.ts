/**
 * The loopback OpenAI-compatible LLM server agl's tests run real clients against. It is the fake vLLM engine of
 * `fake-vllm.ts` (shared with the LLM proxy's tests): chat completions and completions, SSE streaming, vLLM ≥ 0.10.2
 * token ids (`return_token_ids: true` → `prompt_token_ids`, per-choice `token_ids`, per chunk when streaming),
 * logprobs, scriptable replies and tool calls through a policy, and injected faults (an HTTP status, a stall, a closed
 * connection, a stream broken midway). Its tokenizer (`fake-tokenizer.ts`) is deterministic and exactly invertible.
 */
export {
  type Answer,
  type Fault,
  type FakeVllm as FakeLlmServer,
  type FakeVllmOptions as FakeLlmServerOptions,
  type PolicyInput,
  type Reply,
  startFakeVllm as startFakeLlmServer,
} from "./fake-vllm.js";
export { decode, encode, IM_END, IM_START, renderChat, type ChatMessage, type ToolCallText } from "./fake-tokenizer.js";
