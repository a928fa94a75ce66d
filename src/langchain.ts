/**
 * agl's LangChain.js integration (`agl/langchain`; needs `@langchain/core`).
 * @module
 */
export { AglLangChainHandler, registerLangChainTracing } from "./tracer/hooks/langchain.js";
