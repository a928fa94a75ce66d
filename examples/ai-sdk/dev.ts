/**
 * Tries the AI SDK agent with Trainer.dev against any OpenAI-compatible endpoint:
 *
 *   OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-… OPENAI_MODEL=gpt-4o-mini npx tsx examples/ai-sdk/dev.ts
 */
import { createBaseline, Trainer } from "../../src/index.js";
import { tasks } from "../calculator/tasks.js";

const report = await Trainer.dev(new URL("./agent.ts", import.meta.url), tasks as never, {
  algorithm: createBaseline({
    resources: {
      main: {
        kind: {
          case: "llm",
          value: { endpoint: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1", model: process.env.OPENAI_MODEL ?? "gpt-4o-mini" },
        },
      },
    },
  }),
});
console.log(JSON.stringify(report, null, 2));
