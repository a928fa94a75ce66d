/**
 * The RL demo agent (`make demo`): asks the model for the category of a word ("kind of fox ?") and rewards the exact
 * answer "fox animal". Unchanged by training: it calls whatever LLM the rollout's resources name `main_llm` (the agl
 * LLM proxy in front of the local policy server during `make demo`), and the proxy records the token ids the trainer
 * learns from.
 */
import OpenAI from "openai";
import { createTracingFetch, rollout } from "../../src/index.js";

/** A task: a word and its category (color, animal, number or food). */
export interface KindTask {
  word: string;
  answer: string;
}

export default rollout(async function kind(task: KindTask, resources, ctx) {
  const llm = resources.llm("main_llm");
  const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.apiKey ?? "none", fetch: createTracingFetch(), maxRetries: 2 });
  const response = await client.chat.completions.create(
    { model: llm.model, messages: [{ role: "user", content: `kind of ${task.word} ?` }], ...llm.samplingParameters },
    { signal: ctx.signal },
  );
  const answer = (response.choices[0]?.message?.content ?? "").trim().split(/\s+/).join(" ");
  return answer === `${task.word} ${task.answer}` ? 1 : 0;
});
