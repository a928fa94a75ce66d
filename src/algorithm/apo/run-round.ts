import type { RoundReport } from "./apo-report.js";
import { type Candidate, sameTemplates } from "./candidate.js";
import { expandRound } from "./expand-round.js";
import type { StepJob } from "./optimize-step.js";
import type { Rng } from "./rng.js";
import { meanReward } from "./rollout-outcome.js";
import type { SearchContext } from "./search-context.js";
import type { SearchState } from "./search-state.js";

/** Where a round's random choices come from, and the search's shape. */
export interface RoundDraws {
  rng: Rng;
  nextTrain(): number[];
  nextVal(): number[];
  templateNames: readonly string[];
  beamWidth: number;
  branchFactor: number;
  critiqueVariants: number;
  editVariants: number;
}

/**
 * One round of the beam search: draw parents, training batches, prompt variants and the validation batch (all from
 * the seeded generator, before anything runs, so the draws never depend on timing); expand every parent; drop
 * children identical to a candidate; score the beam and the children on the validation batch; keep the top
 * `beamWidth`; measure the leader on the full validation set and make it the best when it beats it.
 */
export async function runRound(ctx: SearchContext, state: SearchState, draws: RoundDraws, round: number): Promise<RoundReport> {
  const shuffled = draws.rng.shuffle(state.beam);
  // A beam smaller than its width (round 1: the seed alone) fills the parent slots cyclically.
  const parents = Array.from({ length: draws.beamWidth }, (_, i) => shuffled[i % shuffled.length] as Candidate);
  const jobs: StepJob[] = [];
  parents.forEach((parent, p) => {
    for (let b = 0; b < draws.branchFactor; b++) {
      const critiqueVariant = draws.rng.int(draws.critiqueVariants);
      const editVariant = draws.rng.int(draws.editVariants);
      // Children of a multi-template run take turns at the templates.
      const target = draws.templateNames[(p * draws.branchFactor + b) % draws.templateNames.length] as string;
      jobs.push({ key: `r${round}p${p}b${b}`, round, parent, target, trainTasks: draws.nextTrain(), critiqueVariant, editVariant });
    }
  });
  const valBatch = draws.nextVal();
  ctx.emit({ type: "round_start", round, parents: parents.map((p) => p.key) });

  const expansion = await expandRound(ctx, jobs, state.nextOrder);
  const pool = [...state.beam];
  const rejected = [...expansion.rejected];
  const children: Candidate[] = [];
  for (const child of expansion.children) {
    const twin = pool.find((c) => sameTemplates(c.templates, child.templates));
    if (twin) rejected.push({ key: child.key, reason: `same texts as ${twin.key}` });
    else {
      pool.push(child);
      children.push(child);
    }
    state.nextOrder = Math.max(state.nextOrder, child.order + 1);
  }
  // Each candidate snapshot became the latest resource when it was published; point "latest" back at the best.
  await state.publishBest(state.best.score === undefined ? round - 1 : round);

  const scored = await Promise.all(
    pool.map(async (cand) => ({ cand, score: meanReward(await state.evaluate(cand, `r${round}:val:${cand.key}`, valBatch)) })),
  );
  scored.sort((a, b) => b.score - a.score || a.cand.order - b.cand.order);
  ctx.emit({ type: "scored", round, scores: scored.map((s) => ({ key: s.cand.key, score: s.score })) });
  state.beam = scored.slice(0, draws.beamWidth).map((s) => s.cand);
  const leader = state.beam[0] as Candidate;
  const { score: leaderScore } = await state.fullScore(leader);
  const improved = state.best.score === undefined || leaderScore > state.best.score;
  if (improved) await state.improve(leader, leaderScore, round);
  return {
    round,
    parents: parents.map((p) => p.key),
    children: children.map((c) => ({ key: c.key, parent: c.parentKey ?? "", target: c.target ?? "" })),
    rejected,
    scores: scored.map((s) => ({ key: s.cand.key, score: s.score })),
    valBatch,
    beam: state.beam.map((c) => c.key),
    leader: leader.key,
    leaderScore,
    best: { key: state.best.cand.key, score: state.best.score ?? leaderScore },
    improved,
    used: { ...ctx.budget.used },
    ...(expansion.outOfTokens ? { outOfTokens: true } : {}),
  };
}
