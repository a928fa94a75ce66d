import type { ApoBudget, BudgetUsage } from "./budget.js";
import type { TemplateText } from "./placeholders.js";

/** One round of the search. */
export interface RoundReport {
  round: number;
  /** Parent slots, by candidate key (a candidate repeats when the beam was smaller than its width). */
  parents: string[];
  /** Children kept, with their parent and the template they changed. */
  children: { key: string; parent: string; target: string }[];
  /** Children dropped, and why (bad placeholders, empty edit, duplicate, …). */
  rejected: { key: string; reason: string }[];
  /** Every candidate's mean reward on the round's validation batch, best first. */
  scores: { key: string; score: number }[];
  /** Validation task indices of the round's batch. */
  valBatch: number[];
  beam: string[];
  /** The beam leader and its score on the full validation set. */
  leader: string;
  leaderScore: number;
  /** The best so far after this round, and whether this round improved it. */
  best: { key: string; score: number };
  improved: boolean;
  used: BudgetUsage;
  /** Some children were not made because the token budget ran out. */
  outOfTokens?: boolean;
}

/** How a run ended. */
export type ApoStatus = "completed" | "budget_exhausted";

/** The result of a run; the CLI also writes it as JSON. */
export interface ApoReport {
  runId: string;
  status: ApoStatus;
  /** Why the run stopped early, when it did. */
  stopReason?: string;
  resumed: boolean;
  /** The seed's score on the full validation set (when it was measured). */
  baseline?: number;
  rounds: RoundReport[];
  best: {
    key: string;
    /** Mean reward on the full validation set; undefined when no candidate was measured on it. */
    score: number | undefined;
    templates: Record<string, TemplateText>;
    /** The snapshot holding the best prompt, published as the latest resource at the end. */
    resourcesId: string;
    version: number;
  };
  budget: { limits: ApoBudget; used: BudgetUsage };
  warnings: string[];
  durationMs: number;
}

const fmt = (score: number | undefined) => (score === undefined ? "—" : score.toFixed(3));

/** The report as text: score per round, best prompt, budget used. */
export function formatReport(report: ApoReport): string {
  const lines = [`APO run ${report.runId}: ${report.status}${report.stopReason ? ` (${report.stopReason})` : ""}`];
  lines.push("", "round  candidates  batch best  leader  full val  best");
  if (report.baseline !== undefined)
    lines.push(`    0           1         —    seed  ${fmt(report.baseline).padStart(8)}  ${fmt(report.baseline)}`);
  for (const r of report.rounds) {
    lines.push(
      `${String(r.round).padStart(5)}  ${String(r.scores.length).padStart(10)}  ${fmt(r.scores[0]?.score).padStart(10)}  ` +
        `${r.leader.padStart(6)}` +
        `  ${fmt(r.leaderScore).padStart(8)}  ${fmt(r.best.score)}${r.improved ? " ↑" : ""}`,
    );
  }
  lines.push(
    "",
    `Best prompt: ${report.best.key} (full validation ${fmt(report.best.score)}), published as ${report.best.resourcesId} ` +
      `v${report.best.version}`,
  );
  for (const [name, text] of Object.entries(report.best.templates)) lines.push(`--- ${name} (${text.engine})`, text.template);
  const { used, limits } = report.budget;
  const of = (n: number, limit: number | undefined) => (limit === undefined ? String(n) : `${n}/${limit}`);
  lines.push(
    "---",
    `Budget used: ${of(used.rollouts, limits.rollouts)} rollouts, ${of(used.optimizerCalls, limits.optimizerCalls)} optimizer calls, ` +
      `${of(used.tokens, limits.tokens)} optimizer tokens; ${(report.durationMs / 1000).toFixed(1)} s`,
  );
  for (const warning of report.warnings) lines.push(`warning: ${warning}`);
  return `${lines.join("\n")}\n`;
}
