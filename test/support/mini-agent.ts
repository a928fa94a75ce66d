/**
 * A minimal runner + tool-using agent for end-to-end tests, written against the store API only: dequeue, bind the
 * proxy LLM resource to the attempt, talk to the model through plain fetch (streamed or not, assembling streamed
 * tool calls the way OpenAI clients do), run tools, emit a reward span, finish the attempt.
 */
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { AttemptStatus, type Rollout } from "../../src/gen/agl/v1/types_pb.js";
import { bindResources } from "../../src/proxy/binding.js";
import type { StoreApi } from "../../src/store/store-api.js";
import type { ChatMessage } from "./fake-tokenizer.js";
import { parseSse } from "./sse.js";

/** The task a test rollout carries. */
export interface AgentTask {
  question: string;
  stream: boolean;
  /** Rewrite the system prompt before the second model call (breaks the token prefix). */
  breakPrefix?: boolean;
}

export const TOOLS = [
  {
    type: "function",
    function: {
      name: "add",
      description: "a+b",
      parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    },
  },
];

async function callModel(baseUrl: string, model: string, messages: ChatMessage[], stream: boolean): Promise<ChatMessage> {
  const res = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages, tools: TOOLS, stream }),
  });
  if (res.status !== 200) throw new Error(`model call failed: ${res.status} ${await res.text()}`);
  if (!stream) return (await res.json()).choices[0].message;
  const message: ChatMessage = { role: "assistant", content: "" };
  const calls: { id: string; type: string; function: { name: string; arguments: string } }[] = [];
  for (const data of parseSse(await res.text())) {
    if (data === "[DONE]") break;
    const delta = JSON.parse(data).choices[0]?.delta ?? {};
    if (typeof delta.content === "string") message.content += delta.content;
    for (const tc of delta.tool_calls ?? []) {
      const call = calls[tc.index] ?? { id: "", type: "function", function: { name: "", arguments: "" } };
      calls[tc.index] = call;
      if (tc.id) call.id = tc.id;
      if (tc.function?.name) call.function.name += tc.function.name;
      if (tc.function?.arguments) call.function.arguments += tc.function.arguments;
    }
  }
  if (calls.length > 0) {
    message.tool_calls = calls;
    if (message.content === "") message.content = null;
  }
  return message;
}

/** The agent: talks to the model at `baseUrl` until it answers without a tool call; resolves to its reward. */
export async function addingAgent(baseUrl: string, model: string, task: AgentTask): Promise<number> {
  const messages: ChatMessage[] = [
    { role: "system", content: "You add numbers with the add tool." },
    { role: "user", content: task.question },
  ];
  let answer = "";
  for (let turn = 0; turn < 5; turn++) {
    if (task.breakPrefix && turn === 1) messages[0] = { role: "system", content: "You add numbers. Be careful." };
    const reply = await callModel(baseUrl, model, messages, task.stream);
    messages.push(reply);
    if (!reply.tool_calls) {
      answer = String(reply.content);
      break;
    }
    for (const call of reply.tool_calls) {
      const args = JSON.parse(call.function.arguments) as { a: number; b: number };
      messages.push({ role: "tool", tool_call_id: call.id, content: String(args.a + args.b) });
    }
  }
  return answer.includes("Done") ? 1 : 0;
}

/** Runs one rollout: the agent, its reward span, and the attempt's outcome. */
async function runRollout(store: StoreApi, rollout: Rollout): Promise<void> {
  const attemptId = rollout.latestAttempt?.attemptId as string;
  const task = toJson(ValueSchema, rollout.input as never) as unknown as AgentTask;
  const snapshot = await store.getResources({ resourcesId: rollout.resourcesId });
  const llm = bindResources(snapshot.resources, rollout.rolloutId, attemptId).main_llm?.kind;
  if (llm?.case !== "llm") throw new Error("no main_llm resource");
  const reward = await addingAgent(llm.value.endpoint, llm.value.model, task);
  const span = {
    rolloutId: rollout.rolloutId,
    attemptId,
    spanId: "feedfacefeedface",
    name: sc.AGL_ANNOTATION,
    attributes: { [sc.rewardNameKey(0)]: attr.string("primary"), [sc.rewardValueKey(0)]: attr.double(reward) },
  };
  await store.updateAttempt({ rolloutId: rollout.rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans: [span] });
}

/** Claims and runs rollouts until `count` were run, `concurrency` at a time. */
export async function runAgents(store: StoreApi, count: number, concurrency = 4): Promise<void> {
  let left = count;
  const worker = async (w: number) => {
    while (left > 0) {
      left--;
      const { rollouts } = await store.dequeueRollouts({ workerId: `mini-${w}`, waitSeconds: 10 });
      for (const rollout of rollouts) await runRollout(store, rollout);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
}

/** The fake engine's policy for this agent: two tool calls, then a final answer. */
export function addingPolicy(input: { messages: ChatMessage[] }): {
  content?: string;
  toolCalls?: { name: string; arguments: Record<string, unknown> }[];
} {
  const toolTurns = input.messages.filter((m) => m.role === "tool").length;
  if (toolTurns < 2)
    return {
      content: toolTurns === 0 ? "Adding." : "",
      toolCalls: [{ name: "add", arguments: { a: toolTurns + 1, b: 10 * (toolTurns + 1) } }],
    };
  return {
    content: `Done: ${input.messages
      .filter((m) => m.role === "tool")
      .map((m) => m.content)
      .join(", ")}`,
  };
}
