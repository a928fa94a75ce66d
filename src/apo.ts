/**
 * Automatic prompt optimization (`agl/apo`), for whoever improves an agent's prompt templates without touching its
 * code: a beam search over templates with textual gradients, every candidate scored through real rollouts of the
 * agent, under a budget, resumable from the store. `agl apo` is the same from the command line.
 *
 * @example
 * ```ts
 * import { Trainer } from "agl";
 * import { createApo } from "agl/apo";
 * const report = await Trainer.dev(new URL("./agent.ts", import.meta.url), { train, val }, {
 *   algorithm: createApo({ templates: { prompt: "Q: {q}" }, optimizer: { baseUrl, apiKey }, rounds: 2 }),
 * });
 * ```
 * @module
 */
export { createApo } from "./algorithm/apo/apo-algorithm.js";
export type { ApoAlgorithmOptions } from "./algorithm/apo/apo-algorithm.js";
export { runApo } from "./algorithm/apo/apo.js";
export type { ApoOptions, OptimizerOptions } from "./algorithm/apo/apo-options.js";
export type { ApoEvent } from "./algorithm/apo/apo-events.js";
export type { ApoReport, ApoStatus, RoundReport } from "./algorithm/apo/apo-report.js";
export { formatReport as formatApoReport } from "./algorithm/apo/apo-report.js";

/** The critique and edit prompts, replaceable through `ApoOptions.prompts`. */
export { defaultApoPrompts } from "./algorithm/apo/apo-prompts.js";
export type { ApoPrompts, PromptVariant } from "./algorithm/apo/apo-prompts.js";

/** Budgets, and what one round of a search shape costs at most (to size a run before paying for it). */
export { roundCost, budgetWarning } from "./algorithm/apo/budget.js";
export type { ApoBudget, BudgetUsage, RoundCost, SearchShape } from "./algorithm/apo/budget.js";

/** The optimizer LLM's client and the rollout evaluator, replaceable through `OptimizerOptions.client` and `ApoOptions.evaluator`. */
export { createOptimizerClient } from "./algorithm/apo/optimizer-client.js";
export type {
  OptimizerClient,
  OptimizerClientOptions,
  OptimizerRequest,
  OptimizerAnswer,
  OptimizerMessage,
} from "./algorithm/apo/optimizer-client.js";
export { createStoreEvaluator } from "./algorithm/apo/store-evaluator.js";
export type { RolloutEvaluator, EvaluationRequest, StoreEvaluatorOptions } from "./algorithm/apo/store-evaluator.js";
export type { RolloutOutcome, OutcomeStatus, ExperimentsFormat } from "./algorithm/apo/rollout-outcome.js";
