import { createConsoleLogger } from "../../core/logger.js";
import { AttemptStatus } from "../../gen/agl/v1/types_pb.js";
import type { ApoEvent } from "./apo-events.js";
import { AglError } from "../../core/errors.js";
import type { ApoOptions } from "./apo-options.js";
import type { ApoReport, RoundReport } from "./apo-report.js";
import { budgetWarning, createBudgetTracker, createPromptTokenEstimator, roundCost, type SearchShape } from "./budget.js";
import { type Candidate, snapshotId } from "./candidate.js";
import { createOptimizerClient } from "./optimizer-client.js";
import { resolveApoOptions } from "./resolve-options.js";
import { createBatchIterator, createRng } from "./rng.js";
import type { RolloutOutcome } from "./rollout-outcome.js";
import { openRun } from "./run-record.js";
import { type RoundDraws, runRound } from "./run-round.js";
import type { SearchContext } from "./search-context.js";
import { createSearchState } from "./search-state.js";
import { createStoreEvaluator } from "./store-evaluator.js";

/** Rollouts retry when their runner died (unresponsive) or they timed out; an agent's own failure is its score. */
const defaultRolloutConfig = {
  maxAttempts: 2,
  retryCondition: [AttemptStatus.UNRESPONSIVE, AttemptStatus.TIMEOUT],
  unresponsiveSeconds: 60,
};

/**
 * Automatic prompt optimization: a beam search over prompt templates with textual gradients. Each round, every
 * parent in the beam is rolled out on training batches; an optimizer LLM critiques it from the runs (messages,
 * rewards, grader feedback) and edits one template; parents and children are scored on a validation batch through
 * real rollouts; the best `beamWidth` survive, and the leader is measured on the full validation set. The best
 * prompt is published as the latest resource (`apo-{run}-best`) at every improvement and at the end.
 *
 * Everything the run decides comes from a seeded generator, and everything it learns is in the store (rollouts by
 * group id, each step's critique and edit in its candidate's snapshot), so running it again with the same `runId`
 * replays finished work from the store and carries on where it stopped.
 *
 * @example
 * ```ts
 * const report = await runApo({
 *   store, train, val,
 *   templates: { prompt: "Choose a room for {attendees} people: {rooms}" },
 *   optimizer: { baseUrl: "https://api.openai.com/v1", apiKey: process.env.OPENAI_API_KEY },
 *   beamWidth: 2, branchFactor: 2, rounds: 2, budget: { rollouts: 400 },
 * });
 * ```
 */
export async function runApo(options: ApoOptions): Promise<ApoReport> {
  const started = performance.now();
  const r = resolveApoOptions(options);
  const { store } = options;
  const names = Object.keys(r.templates);
  const extra = options.resources ?? {};
  const logger = options.logger ?? createConsoleLogger({ prefix: "[apo]" });
  const warnings: string[] = [];
  const emit = (event: ApoEvent) => {
    if (event.type === "warning") {
      warnings.push(event.message);
      if (!options.onEvent) logger.warn(event.message);
    }
    options.onEvent?.(event);
  };
  const optimizer =
    options.optimizer.client ??
    createOptimizerClient({
      baseUrl: options.optimizer.baseUrl,
      ...(options.optimizer.apiKey ? { apiKey: options.optimizer.apiKey } : {}),
      ...(options.optimizer.timeoutMs ? { timeoutMs: options.optimizer.timeoutMs } : {}),
    });
  const shape: SearchShape = {
    beamWidth: r.beamWidth,
    branchFactor: r.branchFactor,
    gradientBatch: Math.min(r.gradientBatchSize, options.train.length),
    valBatch: Math.min(r.valBatchSize, options.val.length),
    valSize: options.val.length,
  };
  const budget = createBudgetTracker(options.budget ?? {});
  const modelWarnings = await optimizer.preflight([r.gradientModel, r.editModel]);
  const { resumed, resourcesId: seedId } = await openRun(
    store,
    r.runId,
    {
      templates: r.templates,
      train: options.train,
      val: options.val,
      variables: options.variables ?? [],
      beamWidth: r.beamWidth,
      branchFactor: r.branchFactor,
      gradientBatchSize: r.gradientBatchSize,
      valBatchSize: r.valBatchSize,
      seed: r.seed,
      runInitialValidation: r.runInitialValidation,
    },
    extra,
  );
  const ctx: SearchContext = {
    store,
    runId: r.runId,
    resumed,
    evaluator:
      options.evaluator ??
      createStoreEvaluator({
        store,
        runId: r.runId,
        resume: resumed,
        rolloutConfig: options.rolloutConfig ?? defaultRolloutConfig,
        ...(options.batchTimeoutSeconds ? { batchTimeoutSeconds: options.batchTimeoutSeconds } : {}),
        onProgress: (key, finished, total) => emit({ type: "batch", key, finished, total }),
        onLate: (key, late, seconds) =>
          emit({
            type: "warning",
            message:
              `${late} rollouts of ${key} did not finish within ${seconds} s: cancelled, they score 0 (is a runner serving ` +
              `the store? see --batch-timeout)`,
          }),
      }),
    budget,
    step: {
      optimizer,
      prompts: r.prompts,
      gradientModel: r.gradientModel,
      editModel: r.editModel,
      temperature: options.optimizer.temperature,
      maxCompletionTokens: options.optimizer.maxCompletionTokens,
      budget,
      tokens: createPromptTokenEstimator(),
      probe: r.probe,
      experiments: options.experiments ?? {},
      ...(options.signal ? { signal: options.signal } : {}),
    },
    extra,
    train: options.train,
    val: options.val,
    concurrency: r.concurrency,
    emit,
    ...(options.signal ? { signal: options.signal } : {}),
  };
  emit({
    type: "start",
    runId: r.runId,
    resumed,
    templates: names,
    train: options.train.length,
    val: options.val.length,
    rounds: r.rounds,
    shape,
    budget: budget.limits,
    roundCost: roundCost(shape, 1),
  });
  const tooSmall = budgetWarning(budget.limits, shape, r.runInitialValidation);
  if (tooSmall) emit({ type: "warning", message: tooSmall });
  for (const message of modelWarnings) emit({ type: "warning", message });

  const rng = createRng(r.seed);
  const draws: RoundDraws = {
    rng,
    nextTrain: createBatchIterator(options.train.length, r.gradientBatchSize, rng),
    nextVal: createBatchIterator(options.val.length, r.valBatchSize, rng),
    templateNames: names,
    beamWidth: r.beamWidth,
    branchFactor: r.branchFactor,
    critiqueVariants: r.prompts.critique.length,
    editVariants: r.prompts.edit.length,
  };
  const seed: Candidate = { key: "seed", templates: r.templates, resourcesId: seedId, round: 0, order: 0 };
  const state = createSearchState(ctx, seed);
  const rounds: RoundReport[] = [];
  let baseline: number | undefined;
  let stopReason: string | undefined;

  if (r.runInitialValidation) {
    if (!budget.fits({ rollouts: shape.valSize }))
      stopReason = `the rollout budget cannot pay for the baseline (${shape.valSize} rollouts)`;
    else {
      const { score, outcomes } = await state.fullScore(seed);
      failIfNothingRan(outcomes);
      baseline = score;
      emit({ type: "baseline", score, rollouts: outcomes.length });
      await state.improve(seed, score, 0);
    }
  }
  for (let round = 1; round <= r.rounds && stopReason === undefined; round++) {
    const cost = roundCost(shape, state.beam.length);
    if (!budget.fits(cost)) {
      stopReason =
        `round ${round} may need ${cost.rollouts} rollouts and ${cost.optimizerCalls} optimizer calls; the budget has ` +
        `${left(budget.limits.rollouts, budget.used.rollouts)} and ${left(budget.limits.optimizerCalls, budget.used.optimizerCalls)} left`;
      break;
    }
    const report = await runRound(ctx, state, draws, round);
    rounds.push(report);
    emit({ type: "round_end", report });
    if (report.outOfTokens) stopReason = "the token budget ran out during the round";
  }

  if (stopReason !== undefined) emit({ type: "stopped", reason: stopReason });
  await state.publishBest(rounds.length);
  const { cand: best, score: bestScore } = state.best;
  const report: ApoReport = {
    runId: r.runId,
    status: stopReason === undefined ? "completed" : "budget_exhausted",
    ...(stopReason === undefined ? {} : { stopReason }),
    resumed,
    ...(baseline === undefined ? {} : { baseline }),
    rounds,
    best: {
      key: best.key,
      score: bestScore,
      templates: best.templates,
      resourcesId: snapshotId(r.runId, "best"),
      version: state.bestVersion,
    },
    budget: { limits: budget.limits, used: { ...budget.used } },
    warnings,
    durationMs: performance.now() - started,
  };
  emit({ type: "done", report });
  return report;
}

const left = (limit: number | undefined, used: number) => (limit === undefined ? "no limit" : String(Math.max(0, limit - used)));

/** A baseline where no rollout succeeded means the agent, its endpoint or the runners are broken: say so early. */
function failIfNothingRan(outcomes: readonly RolloutOutcome[]): void {
  if (outcomes.some((o) => o.status === "succeeded" || o.reward !== undefined)) return;
  const statuses = [...new Set(outcomes.map((o) => o.status))].join(", ");
  const error = outcomes.find((o) => o.error)?.error;
  throw new AglError(
    "rollouts_failed",
    `none of the ${outcomes.length} baseline rollouts succeeded (${statuses})${error ? `; first error: ${error}` : ""}. ` +
      "Check the agent, its LLM endpoint, and that runners serve this store.",
  );
}
