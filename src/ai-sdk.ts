/**
 * agl's Vercel AI SDK integration (`agl/ai-sdk`; needs `ai@6`).
 * @module
 */
export { createAiSdkIntegration, registerAiSdkTracing } from "./tracer/hooks/ai-sdk.js";
