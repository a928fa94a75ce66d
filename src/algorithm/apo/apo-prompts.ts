import type { OptimizerMessage } from "./optimizer-client.js";

/**
 * One way of asking the optimizer LLM: a system message (optional) and a user message, in which `{{name}}` is
 * replaced by the value of `name`. Critique prompts receive `template_name`, `template`, `other_templates`,
 * `experiments` and `mean_reward`; edit prompts receive `template_name`, `template`, `critique` and `placeholders`.
 */
export interface PromptVariant {
  system?: string;
  user: string;
}

/** The critique and edit prompts; each round picks one variant of each per child with the seeded generator. */
export interface ApoPrompts {
  critique: readonly PromptVariant[];
  edit: readonly PromptVariant[];
}

const critiqueSystem =
  "You improve prompt templates for an AI agent. You see a template and graded runs of the agent that used it. " +
  "Be concrete: every point must name a change someone could make to the template text.";

const editSystem =
  "You edit prompt templates. Answer with the complete new template and nothing else: no preamble, no explanation, " + "no code fences.";

/** agl's default prompts: two ways to diagnose, two ways to edit. */
export const defaultApoPrompts: ApoPrompts = {
  critique: [
    {
      system: critiqueSystem,
      user: `The template "{{template_name}}" below was used for the runs that follow (mean reward {{mean_reward}}, higher is better).

<template>
{{template}}
</template>
{{other_templates}}
<runs>
{{experiments}}
</runs>

Study the runs with the lowest rewards first. For each failure, say what the agent did, what the grader's feedback says
it should have done, and which missing or unclear instruction in the template let it happen. Then give at most five
changes to the template, most important first, each one line starting with "- ".`,
    },
    {
      system: critiqueSystem,
      user: `An agent was prompted with the template "{{template_name}}":

<template>
{{template}}
</template>
{{other_templates}}
Here is how it did (mean reward {{mean_reward}}):

<runs>
{{experiments}}
</runs>

The grader follows rules the template may not state. From the rewards and feedback, infer those rules: how to choose
among valid answers, what is never allowed, and the exact answer format that scores best. Reply with two short lists,
"Rules the template should state:" and "Format the answer should follow:", each item one line starting with "- ".`,
    },
  ],
  edit: [
    {
      system: editSystem,
      user: `Rewrite the prompt template "{{template_name}}" so that it follows every point of the critique. You may
restructure it, add rules, steps or an output format, and remove what the critique calls confusing.

<template>
{{template}}
</template>

<critique>
{{critique}}
</critique>

Keep these placeholders exactly as written, each at least once: {{placeholders}}. Add no other placeholder.
Answer with the new template only.`,
    },
    {
      system: editSystem,
      user: `Make the smallest edit to the prompt template "{{template_name}}" that fixes the most important problem named in
the critique. Keep the rest of its wording, tone and length.

<template>
{{template}}
</template>

<critique>
{{critique}}
</critique>

Keep these placeholders exactly as written: {{placeholders}}. Add no other placeholder.
Answer with the full revised template only.`,
    },
  ],
};

/** Renders a variant with `values` into chat messages (a single pass: substituted text is never re-read). */
export function renderPrompt(variant: PromptVariant, values: Record<string, string>): OptimizerMessage[] {
  const fill = (text: string) => text.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (whole, name: string) => values[name] ?? whole);
  const messages: OptimizerMessage[] = [];
  if (variant.system) messages.push({ role: "system", content: fill(variant.system) });
  messages.push({ role: "user", content: fill(variant.user) });
  return messages;
}

/** The template in an edit answer: the first fenced block when the model used one, else the whole answer, trimmed. */
export function extractTemplate(answer: string): string {
  const fenced = /```[\w-]*\n([\s\S]*?)\n?```/.exec(answer);
  const text = (fenced?.[1] ?? answer).trim();
  return text.replace(/^<template>\s*([\s\S]*?)\s*<\/template>$/, "$1");
}
