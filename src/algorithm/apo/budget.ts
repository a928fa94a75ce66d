/** Hard limits of an APO run; an absent limit is no limit. */
export interface ApoBudget {
  /** Rollouts of every kind: baseline, training batches, validation batches, full validations. */
  rollouts?: number;
  /** Optimizer LLM calls (critiques and edits). */
  optimizerCalls?: number;
  /** Tokens of optimizer calls (prompt + completion, from `usage`; estimated as characters / 4 when absent). */
  tokens?: number;
}

/** What a run spent. */
export interface BudgetUsage {
  rollouts: number;
  optimizerCalls: number;
  tokens: number;
}

/** The search shape the cost of a round depends on. */
export interface SearchShape {
  beamWidth: number;
  branchFactor: number;
  /** Training tasks per critique (capped by the training set size). */
  gradientBatch: number;
  /** Validation tasks per candidate per round (capped by the validation set size). */
  valBatch: number;
  /** Size of the validation set. */
  valSize: number;
}

/** The most one round can cost: calls and rollouts. */
export interface RoundCost {
  optimizerCalls: number;
  rollouts: number;
}

/**
 * Upper bound of one round's cost, with B beam width, F branch factor, G gradient batch, V validation batch, N the
 * validation set and b the beam entering the round (1 in round 1, else B):
 * calls = 2·B·F; rollouts = B·F·G (training) + (b + B·F)·V (candidates on the round's batch) + N (the leader on the
 * full validation set; skipped when the leader already has that score).
 */
export function roundCost(shape: SearchShape, beamIn: number): RoundCost {
  const children = shape.beamWidth * shape.branchFactor;
  return {
    optimizerCalls: 2 * children,
    rollouts: children * shape.gradientBatch + (beamIn + children) * shape.valBatch + shape.valSize,
  };
}

/** Tracks spending against a budget. Rollouts and calls are reserved before work starts, so limits are never passed. */
export interface BudgetTracker {
  readonly limits: ApoBudget;
  readonly used: BudgetUsage;
  /** Whether `cost` more still fits. */
  fits(cost: Partial<BudgetUsage>): boolean;
  /** Records spending (counted whether or not it fits: replayed work was already spent). */
  spend(cost: Partial<BudgetUsage>): void;
  /** Tokens neither spent nor reserved, or Infinity. */
  tokensLeft(): number;
  /**
   * Reserves tokens for one call: `want` when that many are free; else, once no other call holds a reservation,
   * whatever is left (at least `min`). Resolves to the tokens reserved, or 0 when the budget cannot pay for `min`.
   */
  reserveTokens(want: number, min: number): Promise<number>;
  /** Returns a reservation (the call then spends what it really used). */
  releaseTokens(amount: number): void;
}

/** Creates a tracker for `limits`. */
export function createBudgetTracker(limits: ApoBudget): BudgetTracker {
  const used: BudgetUsage = { rollouts: 0, optimizerCalls: 0, tokens: 0 };
  const left = (key: keyof BudgetUsage) => (limits[key] ?? Number.POSITIVE_INFINITY) - used[key];
  let reserved = 0;
  let released: (() => void)[] = [];
  const tokensLeft = () => left("tokens") - reserved;
  return {
    limits,
    used,
    fits: (cost) => (Object.keys(used) as (keyof BudgetUsage)[]).every((key) => (cost[key] ?? 0) <= left(key)),
    spend(cost) {
      for (const key of Object.keys(used) as (keyof BudgetUsage)[]) used[key] += cost[key] ?? 0;
    },
    tokensLeft,
    async reserveTokens(want, min) {
      for (;;) {
        const free = tokensLeft();
        const take = free >= want ? want : reserved === 0 ? free : 0;
        if (take > 0 || reserved === 0) {
          if (take < min) return 0;
          reserved += take;
          return take;
        }
        // Calls in flight hold tokens they may not use: wait for one to settle.
        await new Promise<void>((resolve) => released.push(resolve));
      }
    },
    releaseTokens(amount) {
      reserved -= amount;
      const waiting = released;
      released = [];
      for (const wake of waiting) wake();
    },
  };
}

/**
 * The warning to print before a run whose budget cannot pay for the baseline and one full round, or undefined when
 * it can. It says what one round costs and what the budget allows.
 */
export function budgetWarning(limits: ApoBudget, shape: SearchShape, baseline: boolean): string | undefined {
  const round = roundCost(shape, 1);
  const rollouts = round.rollouts + (baseline ? shape.valSize : 0);
  const short: string[] = [];
  if (limits.rollouts !== undefined && limits.rollouts < rollouts) short.push(`${rollouts} rollouts (budget ${limits.rollouts})`);
  if (limits.optimizerCalls !== undefined && limits.optimizerCalls < round.optimizerCalls) {
    short.push(`${round.optimizerCalls} optimizer calls (budget ${limits.optimizerCalls})`);
  }
  if (short.length === 0) return undefined;
  const { beamWidth: B, branchFactor: F, gradientBatch: G, valBatch: V, valSize: N } = shape;
  return (
    `the budget cannot complete one round: ${baseline ? "the baseline and " : ""}round 1 need ${short.join(" and ")}. ` +
    `A round costs 2·B·F = ${round.optimizerCalls} optimizer calls and B·F·G + (b + B·F)·V + N = ` +
    `${B * F * G} + ${B * F + 1}·${V} + ${N} = ${round.rollouts} rollouts in round 1 (b = 1) with B=${B} F=${F} G=${G} V=${V} N=${N}` +
    `${baseline ? `, plus N = ${N} for the baseline` : ""}. APO will stop when the next step no longer fits; ` +
    `raise the budget or lower --beam, --branch, --batch or --val-batch.`
  );
}

/**
 * Estimates a prompt's tokens before it is sent, so a call never gets more answer tokens than the budget has left.
 * Until a server reports `usage`, it assumes the worst (one token per character, plus 64 for the chat format); then the
 * highest ratio seen, +10 %.
 */
export interface PromptTokenEstimator {
  estimate(chars: number): number;
  observe(chars: number, promptTokens: number): void;
}

/** Creates a {@link PromptTokenEstimator}. */
export function createPromptTokenEstimator(): PromptTokenEstimator {
  let ratio: number | undefined;
  return {
    estimate: (chars) => (ratio === undefined ? chars + 64 : Math.ceil((chars * ratio * 11) / 10)),
    observe(chars, promptTokens) {
      if (chars > 0) ratio = Math.max(ratio ?? 0, promptTokens / chars);
    },
  };
}
