import type { JsonValue } from "@bufbuild/protobuf";
import type { StoreApi } from "../../store/store-api.js";
import type { ApoEvent } from "./apo-events.js";
import type { BudgetTracker } from "./budget.js";
import type { ResourceInit } from "./candidate.js";
import type { StepContext } from "./optimize-step.js";
import type { RolloutEvaluator } from "./store-evaluator.js";

/** What every phase of a run shares. */
export interface SearchContext {
  store: StoreApi;
  runId: string;
  /** The run was found in the store: look for finished work before doing it. */
  resumed: boolean;
  evaluator: RolloutEvaluator;
  budget: BudgetTracker;
  step: StepContext;
  /** Resources published beside the templates in every snapshot. */
  extra: Record<string, ResourceInit>;
  train: readonly JsonValue[];
  val: readonly JsonValue[];
  /** Optimizer steps in flight at once. */
  concurrency: number;
  emit(event: ApoEvent): void;
  signal?: AbortSignal;
}

/** Group id (and evaluation key) of one batch of the run. */
export const batchKey = (runId: string, what: string) => `apo:${runId}:${what}`;
