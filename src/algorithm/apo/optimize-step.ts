import type { ApoPrompts, PromptVariant } from "./apo-prompts.js";
import { extractTemplate, renderPrompt } from "./apo-prompts.js";
import type { BudgetTracker, PromptTokenEstimator } from "./budget.js";
import type { Candidate } from "./candidate.js";
import type { OptimizerClient, OptimizerMessage } from "./optimizer-client.js";
import { editDefect, type TemplateText, usedVariables } from "./placeholders.js";
import { formatExperiments, type ExperimentsFormat, meanReward, type RolloutOutcome } from "./rollout-outcome.js";

/** One child to make: a parent, the template to edit, its training batch and the prompt variants drawn for it. */
export interface StepJob {
  key: string;
  round: number;
  parent: Candidate;
  target: string;
  trainTasks: number[];
  critiqueVariant: number;
  editVariant: number;
}

/** What a step produced; stored in the child's snapshot so a resumed run never asks again. */
export interface StepRecord {
  critique: string;
  /** The edit model's answer, as sent. */
  answer: string;
  /** Why the edit was not kept, when it was not. */
  rejected?: string;
  calls: number;
  tokens: number;
}

/** What a step needs besides its job. */
export interface StepContext {
  optimizer: OptimizerClient;
  prompts: ApoPrompts;
  gradientModel: string;
  editModel: string;
  temperature: number | undefined;
  /** Cap on each answer's tokens; also bounded by the token budget left. */
  maxCompletionTokens: number | undefined;
  budget: BudgetTracker;
  tokens: PromptTokenEstimator;
  probe: Record<string, unknown>;
  experiments: ExperimentsFormat;
  signal?: AbortSignal;
}

/** Answers shorter than this many tokens are not worth asking for: the token budget is considered spent. */
const minAnswerTokens = 64;
/** Answer tokens reserved per call under a token budget when no cap is given. */
const defaultAnswerCap = 8_192;

const placeholderList = (text: TemplateText, probe: Record<string, unknown>) => {
  const used = usedVariables(text, probe);
  if (used.length === 0) return "(none)";
  return used.map((v) => (text.engine === "jinja" ? `{{ ${v} }}` : `{${v}}`)).join(", ");
};

/**
 * Makes one child: asks the gradient model for a critique of the parent's target template from the training runs
 * (rewards, feedback, conversations), then the edit model for a new template, and checks its placeholders. Returns
 * undefined when the token budget cannot pay for the calls (nothing is recorded, so a resumed run with a larger
 * budget makes this child).
 */
export async function optimizeStep(job: StepJob, runs: readonly RolloutOutcome[], ctx: StepContext): Promise<StepRecord | undefined> {
  const parentText = job.parent.templates[job.target] as TemplateText;
  const record: StepRecord = { critique: "", answer: "", calls: 0, tokens: 0 };
  const ask = async (model: string, messages: OptimizerMessage[]): Promise<string | undefined> => {
    const chars = messages.reduce((n, m) => n + m.content.length, 0);
    let cap = ctx.maxCompletionTokens;
    let reserved = 0;
    if (ctx.budget.limits.tokens !== undefined) {
      const prompt = ctx.tokens.estimate(chars);
      reserved = await ctx.budget.reserveTokens(prompt + (cap ?? defaultAnswerCap), prompt + minAnswerTokens);
      if (reserved === 0) return undefined;
      cap = reserved - prompt;
    }
    ctx.budget.spend({ optimizerCalls: 1 });
    record.calls++;
    try {
      const answer = await ctx.optimizer.complete(
        {
          model,
          messages,
          ...(ctx.temperature === undefined ? {} : { temperature: ctx.temperature }),
          ...(cap === undefined ? {} : { maxCompletionTokens: cap }),
        },
        ctx.signal,
      );
      ctx.budget.spend({ tokens: answer.tokens });
      record.tokens += answer.tokens;
      if (answer.promptTokens !== undefined) ctx.tokens.observe(chars, answer.promptTokens);
      return answer.text;
    } finally {
      if (reserved > 0) ctx.budget.releaseTokens(reserved);
    }
  };

  const others = Object.entries(job.parent.templates).filter(([name]) => name !== job.target);
  const critiquePrompt = renderPrompt(ctx.prompts.critique[job.critiqueVariant % ctx.prompts.critique.length] as PromptVariant, {
    template_name: job.target,
    template: parentText.template,
    other_templates:
      others.length === 0
        ? ""
        : `\nThe agent also used these templates, which stay as they ` +
          `are:\n${others.map(([n, t]) => `<template name="${n}">\n${t.template}\n</template>`).join("\n")}\n`,
    experiments: formatExperiments(runs, ctx.experiments),
    mean_reward: meanReward(runs).toFixed(3),
  });
  const critique = await ask(ctx.gradientModel, critiquePrompt);
  if (critique === undefined) return undefined;
  record.critique = critique.trim();
  if (!record.critique) return { ...record, rejected: "the critique is empty" };

  const editPrompt = renderPrompt(ctx.prompts.edit[job.editVariant % ctx.prompts.edit.length] as PromptVariant, {
    template_name: job.target,
    template: parentText.template,
    critique: record.critique,
    placeholders: placeholderList(parentText, ctx.probe),
  });
  const answer = await ask(ctx.editModel, editPrompt);
  if (answer === undefined) return undefined;
  record.answer = answer;
  const defect = editDefect({ template: extractTemplate(answer), engine: parentText.engine }, parentText, ctx.probe);
  if (defect !== undefined) record.rejected = defect;
  else if (extractTemplate(answer) === parentText.template) record.rejected = "the edit changed nothing";
  return record;
}
