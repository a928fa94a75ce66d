/**
 * A streaming agent written with the openai client: it asks the model an arithmetic question with `stream: true`,
 * reads the answer chunk by chunk as it arrives, and rewards the right number. Streamed calls are recorded like any
 * other: by the LLM proxy when the rollout's LLM is the proxy (the default `resources.llm()` picks it in a trainer's
 * snapshot), and by `createTracingFetch` in any case — chunks pass through untouched and the span holds the answer
 * assembled from them, with the token ids of every chunk. Run it with `agl run examples/streaming/agent.ts` against a
 * store that publishes an LLM.
 */
import OpenAI from "openai";
import { createTracingFetch, rollout } from "../../src/index.js";
import type { CalculatorTask } from "../calculator/agent.js";

export default rollout(async function streamingCalculator(task: CalculatorTask, resources, ctx) {
  const llm = resources.llm();
  const client = new OpenAI({
    baseURL: llm.endpoint,
    apiKey: llm.apiKey ?? process.env.OPENAI_API_KEY ?? "none",
    fetch: createTracingFetch(),
  });
  const stream = await client.chat.completions.create(
    {
      model: llm.model,
      messages: [
        { role: "system", content: "Reply with the number only." },
        { role: "user", content: task.question },
      ],
      ...llm.samplingParameters,
      stream: true,
    },
    { signal: ctx.signal },
  );
  let reply = "";
  let chunks = 0;
  for await (const chunk of stream) {
    reply += chunk.choices[0]?.delta?.content ?? "";
    chunks++;
  }
  const answer = Number(/-?\d+(\.\d+)?/.exec(reply)?.[0]);
  ctx.logger.info(`answered ${answer} in ${chunks} chunks (expected ${task.answer})`);
  return Math.abs(answer - task.answer) < 1e-6 ? 1 : 0;
});
