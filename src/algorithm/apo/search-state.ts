import type { ResourcesUpdate } from "../../gen/agl/v1/types_pb.js";
import { AglError } from "../../core/errors.js";
import { type Candidate, publishSnapshot, snapshotId, snapshotResources } from "./candidate.js";
import { meanReward, type RolloutOutcome } from "./rollout-outcome.js";
import { batchKey, type SearchContext } from "./search-context.js";

/** What the search knows between rounds: the beam, the history best, and full-validation scores. */
export interface SearchState {
  beam: Candidate[];
  best: { cand: Candidate; score: number | undefined };
  /** Version of the best snapshot last published. */
  bestVersion: number;
  /** Creation order of the next child. */
  nextOrder: number;
  /** Scores `cand` on validation tasks (`what` names the batch); spends the rollouts. */
  evaluate(cand: Candidate, what: string, tasks: readonly number[]): Promise<RolloutOutcome[]>;
  /** The candidate's score on the full validation set, measured once. */
  fullScore(cand: Candidate): Promise<{ score: number; outcomes: RolloutOutcome[] }>;
  /** Publishes the best as the latest resource (`apo-{run}-best`, a new version). */
  publishBest(round: number): Promise<ResourcesUpdate>;
  /** Makes `cand` the best, publishes it, and reports it. */
  improve(cand: Candidate, score: number, round: number): Promise<void>;
}

/** Creates the state of a search starting from `seed`. */
export function createSearchState(ctx: SearchContext, seed: Candidate): SearchState {
  const fullScores = new Map<string, { score: number; outcomes: RolloutOutcome[] }>();
  const allVal = [...ctx.val.keys()];
  const state: SearchState = {
    beam: [seed],
    best: { cand: seed, score: undefined },
    bestVersion: 0,
    nextOrder: 1,
    async evaluate(cand, what, tasks) {
      if (ctx.signal?.aborted) throw new AglError("aborted", "the run was aborted");
      ctx.budget.spend({ rollouts: tasks.length });
      return ctx.evaluator.evaluate(
        {
          key: batchKey(ctx.runId, what),
          resourcesId: cand.resourcesId,
          mode: "val",
          tasks: tasks.map((index) => ({ index, input: ctx.val[index] ?? null })),
          withMessages: false,
        },
        ctx.signal,
      );
    },
    async fullScore(cand) {
      const known = fullScores.get(cand.key);
      if (known) return known;
      const outcomes = await state.evaluate(cand, `full:${cand.key}`, allVal);
      const result = { score: meanReward(outcomes), outcomes };
      fullScores.set(cand.key, result);
      return result;
    },
    async publishBest(round) {
      const { cand, score } = state.best;
      const record = { run: ctx.runId, candidate: cand.key, round, ...(score === undefined ? {} : { score }) };
      const update = await publishSnapshot(ctx.store, snapshotId(ctx.runId, "best"), snapshotResources(cand.templates, ctx.extra, record));
      state.bestVersion = update.version;
      return update;
    },
    async improve(cand, score, round) {
      state.best = { cand, score };
      const update = await state.publishBest(round);
      ctx.emit({ type: "new_best", round, key: cand.key, score, resourcesId: update.resourcesId, version: update.version });
    },
  };
  return state;
}
