/**
 * agl: train TypeScript agents by RL and prompt optimization, around one protobuf-defined store.
 *
 * This entry point is for agent authors and trainers: write an agent, record its LLM calls and rewards, run it, train
 * it, and talk to a store. The other parts have entry points of their own:
 *
 * - `agl/store`: the store in process and its memory, SQLite and PostgreSQL backends;
 * - `agl/server`: the store server (gRPC, Connect, gRPC-Web, JSON, OTLP trace ingest);
 * - `agl/proxy`: the LLM proxy that records the engine's token ids;
 * - `agl/adapter`: spans → trace tree → LLM calls → triplets, and the messages view;
 * - `agl/triplets`: the TripletService client, the same stream over a store, and the triplet messages;
 * - `agl/apo`: automatic prompt optimization;
 * - `agl/openai-agents`, `agl/ai-sdk`, `agl/langchain`: framework tracing hooks;
 * - `agl/gen/agl/v1/*.js`: the generated messages and services of the contract.
 *
 * @example
 * ```ts
 * import OpenAI from "openai";
 * import { createTracingFetch, emitReward, rollout } from "agl";
 *
 * export default rollout(async (task: { question: string }, resources, ctx) => {
 *   const llm = resources.llm();
 *   const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.apiKey ?? "none", fetch: createTracingFetch() });
 *   …
 *   emitReward(1);
 * });
 * ```
 * @module
 */

/** Agents: `rollout(fn)`, or a class with `rollout(task, resources, ctx)`. */
export { rollout } from "./agent/agent.js";
export type { Agent, RolloutContext, RolloutFn, RolloutResult } from "./agent/agent.js";

/** Resources a rollout receives: LLM endpoints, prompt templates (f-string or Jinja), JSON values. */
export { promptTemplate } from "./agent/resources.js";
export type { Resources, LlmResource, PromptTemplateResource } from "./agent/resources.js";

/** Emitters: rewards, messages, objects, exceptions and annotations as spans of the current attempt. */
export { emitReward } from "./emitter/reward.js";
export type { EmitRewardOptions } from "./emitter/reward.js";
export { emitMessage, emitObject, emitException, emitAnnotation, linkAttributes, tagAttributes } from "./emitter/emitters.js";
export type { EmitOptions } from "./emitter/instant-span.js";

/** Tracing: the fetch wrapper that records openai-wire LLM calls, and agl's OpenTelemetry tracer for spans of your own. */
export { createTracingFetch } from "./tracer/hooks/openai-fetch.js";
export type { TracingFetchOptions } from "./tracer/hooks/openai-fetch.js";
export { aglTracer } from "./tracer/provider.js";

/** Runners: claim rollouts from a store and run them on this thread or on a piscina pool of worker threads. */
export { createRunner } from "./runner/runner.js";
export type { Runner, RunnerOptions } from "./runner/runner.js";
export { createInProcessExecutor } from "./runner/in-process-executor.js";
export type { InProcessExecutorOptions } from "./runner/in-process-executor.js";
export { createPoolExecutor } from "./runner/pool-executor.js";
export type { PoolExecutorOptions } from "./runner/pool-executor.js";

/** The trainer, the algorithm contract, and Baseline (run every task, report rewards). */
export { Trainer } from "./trainer/trainer.js";
export type { TrainerOptions, AgentSource } from "./trainer/trainer.js";
export type { Algorithm, AlgorithmContext, Datasets } from "./algorithm/algorithm.js";
export { createBaseline } from "./algorithm/baseline.js";
export type { BaselineOptions, BaselineReport } from "./algorithm/baseline.js";

/** The store client (gRPC through grpc-js), and the store API it shares with the in-process store. */
export { createStoreClient } from "./client/store-client.js";
export type { StoreClient, StoreClientOptions } from "./client/store-client.js";
export type { StoreApi } from "./store/store-api.js";

/** Errors agents and templates raise, and the logger interface (`console` fits). */
export { AglError } from "./core/errors.js";
export type { AglErrorCode } from "./core/errors.js";
export type { Logger } from "./core/logger.js";
