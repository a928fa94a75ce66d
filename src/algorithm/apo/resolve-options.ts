import { randomBytes } from "node:crypto";
import type { ApoOptions } from "./apo-options.js";
import { AglError } from "../../core/errors.js";
import { APO_RECORD } from "./candidate.js";
import { type ApoPrompts, defaultApoPrompts } from "./apo-prompts.js";
import { checkSeedTemplate, probeVariables, type TemplateText } from "./placeholders.js";

/** Options with defaults applied and checked. */
export interface ResolvedApo {
  runId: string;
  templates: Record<string, TemplateText>;
  probe: Record<string, unknown>;
  beamWidth: number;
  branchFactor: number;
  rounds: number;
  gradientBatchSize: number;
  valBatchSize: number;
  seed: number;
  runInitialValidation: boolean;
  prompts: ApoPrompts;
  gradientModel: string;
  editModel: string;
  concurrency: number;
}

const count = (value: number | undefined, fallback: number, name: string, min = 1): number => {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < min) throw new AglError("invalid_options", `${name} must be an integer of at least ${min}, got ${value}`);
  return n;
};

/**
 * Applies defaults and checks everything that can be checked before a rollout runs: non-empty datasets, sane
 * numbers, templates that render with the known variables, a usable run id. Throws {@link AglError}s.
 */
export function resolveApoOptions(options: ApoOptions): ResolvedApo {
  if (options.train.length === 0) {
    throw new AglError("empty_dataset", "the training set is empty: APO rolls training tasks out to write its critiques (--train)");
  }
  if (options.val.length === 0) {
    throw new AglError("empty_dataset", "the validation set is empty: APO scores candidates on validation tasks (--val)");
  }
  const names = Object.keys(options.templates);
  if (names.length === 0)
    throw new AglError("invalid_options", "no prompt template to optimize: give at least one (--prompt NAME=TEMPLATE)");
  const templates: Record<string, TemplateText> = {};
  for (const name of names) {
    const given = options.templates[name];
    const text: TemplateText =
      typeof given === "string"
        ? { template: given, engine: "f-string" }
        : { template: given?.template ?? "", engine: given?.engine ?? "f-string" };
    if (!text.template.trim()) throw new AglError("invalid_options", `prompt template "${name}" is empty`);
    templates[name] = text;
  }
  for (const name of Object.keys(options.resources ?? {})) {
    if (name in templates || name === APO_RECORD)
      throw new AglError("invalid_options", `resource "${name}" clashes with a template of that name or APO's own record`);
  }
  const probe = probeVariables([...options.train, ...options.val], options.variables ?? []);
  for (const name of names) checkSeedTemplate(name, templates[name] as TemplateText, probe);
  if (!options.optimizer.client && !options.optimizer.baseUrl) {
    throw new AglError("invalid_options", "no optimizer endpoint: set optimizer.baseUrl (--optimizer-base-url or OPENAI_BASE_URL)");
  }
  for (const [key, value] of Object.entries(options.budget ?? {})) {
    if (value !== undefined && (!Number.isFinite(value) || value < 0))
      throw new AglError("invalid_options", `budget.${key} must be a number ≥ 0, got ${value}`);
  }
  const prompts: ApoPrompts = {
    critique: options.prompts?.critique ?? defaultApoPrompts.critique,
    edit: options.prompts?.edit ?? defaultApoPrompts.edit,
  };
  if (prompts.critique.length === 0 || prompts.edit.length === 0)
    throw new AglError("invalid_options", "prompts.critique and prompts.edit need at least one variant each");
  const runId = options.runId ?? randomBytes(4).toString("hex");
  if (!/^[\w.-]{1,64}$/.test(runId))
    throw new AglError("invalid_options", `run id "${runId}" must be 1–64 letters, digits, '.', '_' or '-'`);
  return {
    runId,
    templates,
    probe,
    beamWidth: count(options.beamWidth, 4, "beamWidth"),
    branchFactor: count(options.branchFactor, 4, "branchFactor"),
    rounds: count(options.rounds, 3, "rounds", 0),
    gradientBatchSize: count(options.gradientBatchSize, 4, "gradientBatchSize"),
    valBatchSize: count(options.valBatchSize, 16, "valBatchSize"),
    seed: count(options.seed, 0, "seed", 0),
    runInitialValidation: options.runInitialValidation ?? true,
    prompts,
    gradientModel: options.optimizer.gradientModel ?? "gpt-5-mini",
    editModel: options.optimizer.editModel ?? "gpt-4.1-mini",
    concurrency: count(options.optimizer.concurrency, 4, "optimizer.concurrency"),
  };
}
