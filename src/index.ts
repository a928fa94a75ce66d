/**
 * agl: train TypeScript agents by RL and prompt optimization, around one protobuf-defined store.
 *
 * @example
 * ```ts
 * import { createStoreClient } from "agl";
 * const store = createStoreClient({ baseUrl: "http://127.0.0.1:4747" });
 * await store.enqueueRollouts({ rollouts: [{ metadata: { task: 1 } }] });
 * ```
 * @module
 */

/** The store's API, shared by the in-process store and the network client. */
export type { StoreApi, StoreCallOptions } from "./store/store-api.js";

/** The store in process: the state machine over a storage backend. */
export { createStore } from "./store/store.js";
export type { Store, StoreOptions } from "./store/store.js";
export type { PendingWrites } from "./store/pending-writes.js";
export type { StoreLimits } from "./store/validate.js";

/** Storage backends. */
export { createMemoryBackend } from "./store/memory-backend.js";
export { createSqliteBackend } from "./store/sqlite-backend.js";
export type { SqliteBackendOptions } from "./store/sqlite-backend.js";
export type { StorageBackend, StorageTx, StoreEvent } from "./store/backend.js";

/** The store server and its client. */
export { startStoreServer } from "./server/store-server.js";
export type { StoreServer, StoreServerOptions } from "./server/store-server.js";
export { createStoreClient } from "./client/store-client.js";
export type { StoreClient, StoreClientOptions } from "./client/store-client.js";

/** The LLM proxy: OpenAI-compatible, attempt-scoped, records the engine's token ids; pause/drain for weight swaps. */
export { createLlmProxy } from "./proxy/llm-proxy.js";
export type { LlmProxy, LlmProxyOptions, ProxyStatus } from "./proxy/llm-proxy.js";
export type { Backend } from "./proxy/backends.js";
export type { PauseOptions, PauseMode } from "./proxy/pause-gate.js";
export { proxyBaseUrl, bindResource, bindResources } from "./proxy/binding.js";

/** Adapters: spans → trace tree → LLM calls → triplets (transition or trajectory), and the messages view. */
export { spansToTriplets, createTripletAdapter } from "./adapter/spans-to-triplets.js";
export type { TripletAdapter, TripletAdapterOptions, TripletRollout, AdaptedSpans } from "./adapter/spans-to-triplets.js";
export type { MismatchKind } from "./adapter/triplets.js";
/** One definition of a triplet: the `agl.v1` messages the adapter builds and the `TripletService` sends. */
export type { Triplet, TripletStats, RolloutTriplets } from "./gen/agl/v1/triplets_pb.js";
export { spansToMessages } from "./adapter/messages-view.js";
export type { MessagesView, CallConversation } from "./adapter/messages-view.js";
export type { ChatMessage } from "./adapter/chat-messages.js";
export { buildTraceTree } from "./adapter/trace-tree.js";
export type { TraceTree, TraceNode } from "./adapter/trace-tree.js";
export { repairHierarchy } from "./adapter/repair-hierarchy.js";
export { findLlmCalls } from "./adapter/llm-calls.js";
export type { LlmCall, FindLlmCallsOptions } from "./adapter/llm-calls.js";
export { defaultRecognizers, recognizeLlmCall, agentNameOf } from "./adapter/recognizers.js";
export type { LlmCallRecognizer } from "./adapter/recognizers.js";
export { rewardOf, matchRewards } from "./adapter/rewards.js";
export type { RewardMatchPolicy } from "./adapter/rewards.js";
/** Span names and attribute keys shared by the proxy, the tracer hooks and the adapters. */
export * as semconv from "./adapter/semconv.js";

/** TripletService: the stream of training data from finished rollouts, over any store. */
export { createTripletService } from "./triplets/triplet-service.js";
export type { TripletServiceOptions } from "./triplets/triplet-service.js";
export { streamTriplets } from "./triplets/stream-triplets.js";
export { createTripletClient } from "./triplets/triplet-client.js";
export type { TripletClient, TripletClientOptions } from "./triplets/triplet-client.js";

/** Agents: `rollout(fn)` or a class with `rollout(task, resources, ctx)`; typed resources and prompt templates. */
export { rollout, isAgent } from "./agent/agent.js";
export type { Agent, RolloutContext, RolloutFn, RolloutMode, RolloutResult, RolloutAgentOptions } from "./agent/agent.js";
export { resolveResources, promptTemplate } from "./agent/resources.js";
export type {
  Resources,
  AgentResource,
  LlmResource,
  PromptTemplateResource,
  JsonResource,
  ResourcesData,
  TemplateEngineName,
} from "./agent/resources.js";
export { bindProxyEndpoint } from "./agent/proxy-url.js";
export { renderFString } from "./agent/f-string.js";
export { renderJinja } from "./agent/jinja.js";
export type { JinjaRenderOptions } from "./agent/jinja.js";
export { loadAgent } from "./agent/load-agent.js";
export { AglError, errorInfo } from "./agent/errors.js";
export type { AglErrorCode, ErrorInfo } from "./agent/errors.js";
export { createConsoleLogger, silentLogger } from "./agent/logger.js";
export type { Logger, LogLevel, ConsoleLoggerOptions } from "./agent/logger.js";

/** Emitters: rewards, messages, objects, exceptions and annotations as spans of the current attempt. */
export { emitReward } from "./emitter/reward.js";
export type { EmitRewardOptions } from "./emitter/reward.js";
export { emitMessage, emitObject, emitException, emitAnnotation, linkAttributes, tagAttributes } from "./emitter/emitters.js";
export type { EmitOptions, SpanCoreFields } from "./emitter/instant-span.js";

/** Tracing: agl's OpenTelemetry tracer, the attempt scope, the span shipper, and the openai fetch wrapper. */
export { aglTracer } from "./tracer/provider.js";
export { currentAttempt } from "./tracer/attempt-scope.js";
export type { AttemptScope } from "./tracer/attempt-scope.js";
export { createSpanShipper } from "./tracer/span-shipper.js";
export type { SpanShipper, SpanShipperOptions, SpanShipperStats } from "./tracer/span-shipper.js";
export { createTracingFetch } from "./tracer/hooks/openai-fetch.js";
export type { TracingFetchOptions } from "./tracer/hooks/openai-fetch.js";

/** OTLP/HTTP trace ingest for the store server (`fallback` option; `agl serve` installs it). */
export { createOtlpTracesHandler } from "./otlp/otlp-route.js";
export type { OtlpTracesHandlerOptions } from "./otlp/otlp-route.js";

/** Runners: the loop, executors (this thread, or a piscina pool with a blocked-thread supervisor). */
export { createRunner } from "./runner/runner.js";
export type { Runner, RunnerOptions, RunnerSummary, AttemptEndEvent } from "./runner/runner.js";
export { createInProcessExecutor } from "./runner/in-process-executor.js";
export type { InProcessExecutorOptions } from "./runner/in-process-executor.js";
export { createPoolExecutor } from "./runner/pool-executor.js";
export type { PoolExecutorOptions } from "./runner/pool-executor.js";
export type { AttemptExecutor, AttemptHandle, AttemptOutcome, AttemptTask, AttemptEnd, AbortKind } from "./runner/attempt-task.js";

/** Algorithms and the trainer. */
export type { Algorithm, AlgorithmContext, Datasets } from "./algorithm/algorithm.js";
export { createBaseline } from "./algorithm/baseline.js";
export type { BaselineOptions, BaselineReport, BaselineRollout } from "./algorithm/baseline.js";
export { Trainer } from "./trainer/trainer.js";
export type { TrainerOptions, AgentSource } from "./trainer/trainer.js";

/** APO: automatic prompt optimization by beam search with textual gradients, over the store and the runners. */
export { runApo } from "./algorithm/apo/apo.js";
export { createApo } from "./algorithm/apo/apo-algorithm.js";
export type { ApoAlgorithmOptions } from "./algorithm/apo/apo-algorithm.js";
export type { ApoOptions, OptimizerOptions } from "./algorithm/apo/apo-options.js";
export type { ApoEvent } from "./algorithm/apo/apo-events.js";
export type { ApoReport, ApoStatus, RoundReport } from "./algorithm/apo/apo-report.js";
export { formatReport as formatApoReport } from "./algorithm/apo/apo-report.js";
export { ApoError } from "./algorithm/apo/apo-error.js";
export type { ApoErrorCode } from "./algorithm/apo/apo-error.js";
export { defaultApoPrompts } from "./algorithm/apo/apo-prompts.js";
export type { ApoPrompts, PromptVariant } from "./algorithm/apo/apo-prompts.js";
export { roundCost, budgetWarning } from "./algorithm/apo/budget.js";
export type { ApoBudget, BudgetUsage, RoundCost, SearchShape } from "./algorithm/apo/budget.js";
export { createOptimizerClient } from "./algorithm/apo/optimizer-client.js";
export type { OptimizerClient, OptimizerClientOptions, OptimizerRequest, OptimizerAnswer, OptimizerMessage } from "./algorithm/apo/optimizer-client.js";
export { createStoreEvaluator } from "./algorithm/apo/store-evaluator.js";
export type { RolloutEvaluator, EvaluationRequest, StoreEvaluatorOptions } from "./algorithm/apo/store-evaluator.js";
export type { RolloutOutcome, OutcomeStatus } from "./algorithm/apo/rollout-outcome.js";
