import type { JsonValue, MessageInitShape } from "@bufbuild/protobuf";
import type { Logger } from "../../core/logger.js";
import type { TemplateEngineName } from "../../agent/resources.js";
import type { RolloutConfigSchema } from "../../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../store/store-api.js";
import type { ApoEvent } from "./apo-events.js";
import type { ApoPrompts } from "./apo-prompts.js";
import type { ApoBudget } from "./budget.js";
import type { ResourceInit } from "./candidate.js";
import type { OptimizerClient } from "./optimizer-client.js";
import type { ExperimentsFormat } from "./rollout-outcome.js";
import type { RolloutEvaluator } from "./store-evaluator.js";

/** The optimizer LLM: any OpenAI-compatible endpoint. */
export interface OptimizerOptions {
  /** e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey?: string;
  /** Writes the critique ("textual gradient"). Default `gpt-5-mini`. */
  gradientModel?: string;
  /** Writes the edited template. Default `gpt-4.1-mini`. */
  editModel?: string;
  /** Sampling temperature of both calls. Default: the endpoint's default. */
  temperature?: number;
  /** Cap on each answer's tokens (sent as `max_completion_tokens`). Default: none, unless a token budget applies. */
  maxCompletionTokens?: number;
  /** Calls in flight at once. Default 4. */
  concurrency?: number;
  /** Per request. Default 120 s. */
  timeoutMs?: number;
  /** Use this client instead of one built from the fields above. */
  client?: OptimizerClient;
}

/** Options of {@link runApo}. */
export interface ApoOptions {
  /** Where candidates are published and rollouts enqueued; runners serving this store execute them. */
  store: StoreApi;
  /** The templates to optimize, by resource name (a string is an f-string template). */
  templates: Record<string, string | { template: string; engine?: TemplateEngineName }>;
  /** Training tasks (rolled out to write critiques) and validation tasks (rolled out to score candidates). */
  train: readonly JsonValue[];
  val: readonly JsonValue[];
  optimizer: OptimizerOptions;
  /** Published with every candidate, e.g. `{ llm: { kind: { case: "llm", value: { endpoint, model } } } }`. */
  resources?: Record<string, ResourceInit>;
  /** Variables the agent gives its templates besides the task's fields. */
  variables?: readonly string[];
  /** Candidates kept after each round (B). Default 4. */
  beamWidth?: number;
  /** Children per parent per round (F). Default 4. */
  branchFactor?: number;
  /** Rounds. Default 3. */
  rounds?: number;
  /** Training tasks per critique (G). Default 4. */
  gradientBatchSize?: number;
  /** Validation tasks each candidate is scored on per round (V). Default 16. */
  valBatchSize?: number;
  /** Score the seed on the full validation set first (it becomes the first best). Default true. */
  runInitialValidation?: boolean;
  budget?: ApoBudget;
  /** Every random choice comes from it. Default 0. */
  seed?: number;
  /** Names the run's snapshots and rollouts; running again with the same id resumes it. Default: a fresh id. */
  runId?: string;
  /** Replace the critique and/or edit prompts. */
  prompts?: Partial<ApoPrompts>;
  /** Retry and timeout policy of each rollout. Default: 3 attempts, retried when failed, timed out or unresponsive. */
  rolloutConfig?: MessageInitShape<typeof RolloutConfigSchema>;
  /** Longest wait for one batch of rollouts. Default 3,600 s. */
  batchTimeoutSeconds?: number;
  /** How the runs are shown to the critique. */
  experiments?: ExperimentsFormat;
  /** Runs batches; default: through the store (`createStoreEvaluator`). */
  evaluator?: RolloutEvaluator;
  /** Progress, as it happens. */
  onEvent?(event: ApoEvent): void;
  logger?: Logger;
  signal?: AbortSignal;
}
