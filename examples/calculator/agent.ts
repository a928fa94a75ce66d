/**
 * A calculator agent written with the openai client: the model gets a `calculate` tool, calls it, and answers; the
 * reward is 1 when the final answer matches the task's. Run it with `agl run examples/calculator/agent.ts` against a
 * store, or try it with `npx tsx examples/calculator/dev.ts`.
 */
import OpenAI from "openai";
import { createTracingFetch, rollout } from "../../src/index.js";

/** A task: a question and the number that answers it. */
export interface CalculatorTask {
  question: string;
  answer: number;
}

const operations: Record<string, (a: number, b: number) => number> = {
  "+": (a, b) => a + b,
  "-": (a, b) => a - b,
  "*": (a, b) => a * b,
  "/": (a, b) => a / b,
};

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "calculate",
      description: "Applies an arithmetic operation to two numbers.",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, op: { type: "string", enum: Object.keys(operations) }, b: { type: "number" } },
        required: ["a", "op", "b"],
      },
    },
  },
];

export default rollout(async function calculator(task: CalculatorTask, resources, ctx) {
  const llm = resources.llm();
  // The fetch wrapper records each call (and the token ids vLLM-style engines return) as a span of this rollout.
  const client = new OpenAI({
    baseURL: llm.endpoint,
    apiKey: llm.apiKey ?? process.env.OPENAI_API_KEY ?? "none",
    fetch: createTracingFetch(),
  });
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: "Solve the problem with the calculate tool, then reply with the number only." },
    { role: "user", content: task.question },
  ];
  for (let turn = 0; turn < 4; turn++) {
    const response = await client.chat.completions.create(
      { model: llm.model, messages, tools, ...llm.samplingParameters },
      { signal: ctx.signal },
    );
    const message = response.choices[0]?.message;
    if (!message) break;
    messages.push(message);
    if (!message.tool_calls?.length) {
      const answer = Number(/-?\d+(\.\d+)?/.exec(message.content ?? "")?.[0]);
      ctx.logger.info(`answered ${answer} (expected ${task.answer})`);
      return Math.abs(answer - task.answer) < 1e-6 ? 1 : 0;
    }
    for (const call of message.tool_calls) {
      if (call.type !== "function") continue;
      const { a, op, b } = JSON.parse(call.function.arguments) as { a: number; op: string; b: number };
      const result = operations[op]?.(a, b);
      messages.push({ role: "tool", tool_call_id: call.id, content: result === undefined ? `unknown operation ${op}` : String(result) });
    }
  }
  return 0;
});
