/**
 * The calculator task written with the Vercel AI SDK (ai@6): `generateText` with a tool and up to three steps. agl's
 * AI SDK integration records each step as an LLM-call span with no per-call code; the fetch wrapper under the
 * provider adds raw bodies and token ids. Try it with `npx tsx examples/ai-sdk/dev.ts`.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";
import { registerAiSdkTracing } from "../../src/ai-sdk.js";
import { createTracingFetch, rollout } from "../../src/index.js";

await registerAiSdkTracing();

const calculate = tool({
  description: "Applies an arithmetic operation to two numbers.",
  inputSchema: z.object({ a: z.number(), op: z.enum(["+", "-", "*", "/"]), b: z.number() }),
  execute: async ({ a, op, b }) => (op === "+" ? a + b : op === "-" ? a - b : op === "*" ? a * b : a / b),
});

export default rollout(async function aiSdkCalculator(task: { question: string; answer: number }, resources, ctx) {
  const llm = resources.llm();
  const provider = createOpenAICompatible({
    name: "agl",
    baseURL: llm.endpoint,
    apiKey: llm.apiKey ?? process.env.OPENAI_API_KEY ?? "none",
    fetch: createTracingFetch(),
    // Sampling parameters as published (e.g. temperature, or return_token_ids for a vLLM engine).
    transformRequestBody: (body) => ({ ...body, ...llm.samplingParameters }),
  });
  const { text } = await generateText({
    model: provider(llm.model),
    system: "Solve the problem with the calculate tool, then reply with the number only.",
    prompt: task.question,
    tools: { calculate },
    stopWhen: stepCountIs(3),
    abortSignal: ctx.signal,
    experimental_telemetry: { functionId: "ai-sdk-calculator" },
  });
  const answer = Number(/-?\d+(\.\d+)?/.exec(text)?.[0]);
  return Math.abs(answer - task.answer) < 1e-6 ? 1 : 0;
});
