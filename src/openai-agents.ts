/**
 * agl's OpenAI Agents JS integration (`agl/openai-agents`; needs `@openai/agents`).
 * @module
 */
export { createAgentsTraceProcessor, registerOpenAIAgentsTracing } from "./tracer/hooks/openai-agents.js";
export type { RegisterAgentsTracingOptions } from "./tracer/hooks/openai-agents.js";
