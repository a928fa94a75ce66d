/**
 * The word-math agent (`make demo-real`), written for a base model. Its prompt is a few-shot completion template held
 * as a resource (`word_math`, published by the trainer from prompts/: `agl train … -- --prompt-templates`), `{question}`
 * filled in; the first call asks for the calculation, the agent's calculator tool evaluates it, and a second call, given
 * the result, asks for the answer. The reward is 1 when the answer is the right number, so the model has to pick the
 * right numbers and operations (two a problem), not only the format. It calls whatever LLM the rollout's resources name
 * `main_llm` (the agl LLM proxy in front of the trainer's engine), through the openai client's `/v1/completions`.
 */
import OpenAI from "openai";
import { createTracingFetch, rollout } from "../../src/index.js";
import type { WordMathTask } from "./tasks.js";

/** The prompt template resource's name. */
export const PROMPT_RESOURCE = "word_math";

/**
 * The calculator tool: an expression of whole numbers with + - * / and parentheses, evaluated with the usual
 * precedence (rounded to 2 decimals), or undefined for anything else (a division by zero included).
 */
export function calculate(expression: string): number | undefined {
  const tokens = expression.match(/\d+|[-+*/()]|\S/g) ?? [];
  let at = 0;
  const peek = () => tokens[at];
  const factor = (): number | undefined => {
    const token = tokens[at++];
    if (token === "(") {
      const value = sum();
      return tokens[at++] === ")" ? value : undefined;
    }
    return token !== undefined && /^\d+$/.test(token) ? Number(token) : undefined;
  };
  const product = (): number | undefined => {
    let value = factor();
    while (value !== undefined && (peek() === "*" || peek() === "/")) {
      const [op, right] = [tokens[at++], factor()];
      value = right === undefined || (op === "/" && right === 0) ? undefined : op === "*" ? value * right : value / right;
    }
    return value;
  };
  const sum = (): number | undefined => {
    let value = product();
    while (value !== undefined && (peek() === "+" || peek() === "-")) {
      const [op, right] = [tokens[at++], product()];
      value = right === undefined ? undefined : op === "+" ? value + right : value - right;
    }
    return value;
  };
  const value = tokens.length ? sum() : undefined;
  return value === undefined || at !== tokens.length ? undefined : Math.round(value * 100) / 100;
}

export default rollout(async function wordMath(task: WordMathTask, resources, ctx) {
  const llm = resources.llm("main_llm");
  const prompt = resources.promptTemplate(PROMPT_RESOURCE);
  const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.apiKey ?? "none", fetch: createTracingFetch(), maxRetries: 2 });
  const complete = async (text: string, maxTokens: number) => {
    const response = await client.completions.create(
      { ...llm.samplingParameters, model: llm.model, prompt: text, max_tokens: maxTokens, stop: ["\n"] },
      { signal: ctx.signal },
    );
    return (response.choices[0]?.text ?? "").split("\n")[0] ?? "";
  };
  const asked = prompt.format({ question: task.question });
  const expression = await complete(asked, 24);
  const result = calculate(expression);
  const answer = await complete(`${asked}${expression}\nResult: ${result ?? "error"}\nA:`, 8);
  return Number(answer.trim()) === task.answer ? 1 : 0;
});
