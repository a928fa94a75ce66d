/**
 * The room-booking agent: renders its prompt template `booking` with the request and the room table, asks the model
 * once, and grades the answer with the deterministic grader, reporting the reward with text feedback (APO's critique
 * reads it). The model is the `llm` resource when one is published (`agl apo --llm-model …`), else
 * `$AGL_AGENT_MODEL` (default gpt-4.1-nano) at `$OPENAI_BASE_URL`.
 */
import OpenAI from "openai";
import { createTracingFetch, emitReward, rollout } from "../../src/index.js";
import { type BookingTask, grade, roomTable } from "./rooms.js";

const clients = new Map<string, OpenAI>();
const clientFor = (baseURL: string | undefined, apiKey: string | undefined) => {
  const key = `${baseURL}\n${apiKey}`;
  let client = clients.get(key);
  if (!client) {
    client = new OpenAI({ baseURL, apiKey: apiKey ?? "none", fetch: createTracingFetch() });
    clients.set(key, client);
  }
  return client;
};

export default rollout(
  async (task: BookingTask, resources, ctx) => {
    const published = resources.get("llm");
    const llm = published?.kind === "llm" ? published : undefined;
    const client = clientFor(llm?.endpoint ?? process.env.OPENAI_BASE_URL, llm?.apiKey ?? process.env.OPENAI_API_KEY);
    const prompt = resources.promptTemplate("booking").format({
      ...task,
      needs: task.needs.length > 0 ? task.needs.join(", ") : "nothing special",
      accessible: task.accessible ? "yes" : "no",
      rooms: roomTable(task),
    });
    const completion = await client.chat.completions.create(
      {
        model: llm?.model ?? process.env.AGL_AGENT_MODEL ?? "gpt-4.1-nano",
        messages: [
          { role: "system", content: "You are a scheduling assistant." },
          { role: "user", content: prompt },
        ],
        temperature: 0,
      },
      { signal: ctx.signal },
    );
    const answer = completion.choices[0]?.message.content ?? "";
    const { reward, feedback } = grade(task, answer);
    emitReward(reward, { feedback });
  },
  { name: "room-booking" },
);
