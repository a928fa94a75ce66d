/**
 * The word-math agent (`make demo-real`), written for a base model: a few-shot completion prompt (a template held in
 * prompts/, `{question}` filled in) asks for the calculation; the agent's calculator tool evaluates it; a second call,
 * with the result, asks for the answer. The reward is 1 when the answer is the right number, so the model has to
 * pick the right numbers and operation, not only the format. It calls whatever LLM the rollout's resources name
 * `main_llm` (the agl LLM proxy in front of the trainer's engine), through the openai client's `/v1/completions`.
 */
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { createTracingFetch, promptTemplate, rollout } from "../../src/index.js";
import type { WordMathTask } from "./tasks.js";

/**
 * The starting prompt: the best of the three in prompts/ by greedy accuracy on 32 validation problems (instructed
 * 1.000, four-shot 0.938, three-shot 0.688). It leaves little to learn: the task needs harder problems for a gain.
 */
export const PROMPT = promptTemplate(readFileSync(new URL("./prompts/instructed.txt", import.meta.url), "utf8").trimEnd());

/** The calculator tool: `a op b` with two whole numbers, or undefined for anything else. */
export function calculate(expression: string): number | undefined {
  const match = /^\s*(\d+)\s*([-+*/])\s*(\d+)\s*$/.exec(expression);
  if (!match) return undefined;
  const [a, op, b] = [Number(match[1]), match[2], Number(match[3])];
  const value = op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : b === 0 ? undefined : a / b;
  return value === undefined ? undefined : Math.round(value * 100) / 100;
}

export default rollout(async function wordMath(task: WordMathTask, resources, ctx) {
  const llm = resources.llm("main_llm");
  const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.apiKey ?? "none", fetch: createTracingFetch(), maxRetries: 2 });
  const complete = async (prompt: string, maxTokens: number) => {
    const response = await client.completions.create(
      { ...llm.samplingParameters, model: llm.model, prompt, max_tokens: maxTokens, stop: ["\n"] },
      { signal: ctx.signal },
    );
    return (response.choices[0]?.text ?? "").split("\n")[0] ?? "";
  };
  const asked = PROMPT.format({ question: task.question });
  const expression = await complete(asked, 12);
  const result = calculate(expression);
  const answer = await complete(`${asked}${expression}\nResult: ${result ?? "error"}\nA:`, 6);
  return Number(answer.trim()) === task.answer ? 1 : 0;
});
