import type { ApoReport, RoundReport } from "./apo-report.js";
import type { ApoBudget, RoundCost, SearchShape } from "./budget.js";

/** What an APO run reports while it runs (the CLI prints these). */
export type ApoEvent =
  | {
      type: "start";
      runId: string;
      /** The run was found in the store: finished work is replayed from it, not redone. */
      resumed: boolean;
      templates: string[];
      train: number;
      val: number;
      rounds: number;
      shape: SearchShape;
      budget: ApoBudget;
      /** Upper bound of one round (round 1). */
      roundCost: RoundCost;
    }
  | { type: "warning"; message: string }
  | { type: "batch"; key: string; finished: number; total: number }
  | { type: "baseline"; score: number; rollouts: number }
  | { type: "round_start"; round: number; parents: string[] }
  | { type: "child"; round: number; key: string; parent: string; target: string; rejected?: string; replayed: boolean }
  | { type: "scored"; round: number; scores: { key: string; score: number }[] }
  | { type: "new_best"; round: number; key: string; score: number; resourcesId: string; version: number }
  | { type: "round_end"; report: RoundReport }
  | { type: "stopped"; reason: string }
  | { type: "done"; report: ApoReport };
