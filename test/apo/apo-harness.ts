import { fileURLToPath } from "node:url";
import type { JsonValue } from "@bufbuild/protobuf";
import { silentLogger } from "../../src/core/logger.js";
import type { ApoOptions } from "../../src/algorithm/apo/apo-options.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createPoolExecutor } from "../../src/runner/pool-executor.js";
import type { AttemptExecutor } from "../../src/runner/attempt-task.js";
import { createRunner, type Runner } from "../../src/runner/runner.js";
import { type FakeLlmServer, type PolicyInput, type Reply, startFakeLlmServer } from "../support/fake-llm-server.js";
import { type StoreHarness, startStoreHarness } from "../support/store-harness.js";

export const agentModule = fileURLToPath(new URL("./fixtures/hint-agent.ts", import.meta.url));

/** Tasks of the hint game: `{ q: "item 7 (b)", answer: "B7" }`, kinds cycling a, b, c from `start`. */
export function hintTasks(count: number, start = 0): JsonValue[] {
  return Array.from({ length: count }, (_, i) => {
    const n = start + i;
    const kind = "abc"[n % 3] as string;
    return { q: `item ${n} (${kind})`, answer: `${kind.toUpperCase()}${n}` };
  });
}

const lastUser = (input: PolicyInput) => String([...input.messages].reverse().find((m) => m.role === "user")?.content ?? "");
const allText = (input: PolicyInput) => input.messages.map((m) => String(m.content ?? "")).join("\n");

/** The agent's model: answers a task of kind k correctly exactly when its prompt contains `hint-k`. */
export function agentPolicy(input: PolicyInput): Reply {
  const text = allText(input);
  const match = /item (\d+) \((\w)\)/.exec(text);
  if (!match) return { content: "?" };
  const [, n, kind] = match;
  return { content: text.includes(`hint-${kind}`) ? `It is ${kind?.toUpperCase()}${n}.` : "I am not sure." };
}

/**
 * The optimizer's model, scripted: a critique names the hint of the first failing run (runs come worst first) whose
 * hint the template lacks; an edit appends the hint the critique asked for.
 */
export function optimizerPolicy(input: PolicyInput): Reply {
  const user = lastUser(input);
  const template = /<template>\n([\s\S]*?)\n<\/template>/.exec(user)?.[1] ?? "";
  if (user.includes("<critique>")) {
    const critique = /<critique>\n([\s\S]*?)\n<\/critique>/.exec(user)?.[1] ?? "";
    const hint = /add (hint-\w)/.exec(critique)?.[1];
    return { content: hint ? `${template} ${hint}` : template };
  }
  for (const m of user.matchAll(/Grader feedback: expected \w+ \(kind (\w)\)/g)) {
    if (!template.includes(`hint-${m[1]}`)) return { content: `- add hint-${m[1]} to the template` };
  }
  return { content: "- nothing to change" };
}

export interface ApoHarnessOptions {
  /** `pool`: piscina worker threads loading the agent module; `inline`: the runner's thread. Default inline. */
  executor?: "pool" | "inline";
  workers?: number;
  concurrency?: number;
  agentLatencyMs?: number;
  optimizerPolicy?: (input: PolicyInput) => Reply;
}

/** A store behind a real server, two scripted LLM servers (agent, optimizer), and a runner serving the store. */
export interface ApoHarness {
  store: StoreHarness;
  agentLlm: FakeLlmServer;
  optimizer: FakeLlmServer;
  runner: Runner;
  /** APO options wired to all of the above; spread and override. */
  base(): Pick<ApoOptions, "store" | "optimizer" | "resources" | "logger">;
  close(): Promise<void>;
}

export async function startApoHarness(options: ApoHarnessOptions = {}): Promise<ApoHarness> {
  const store = await startStoreHarness();
  const agentLlm = await startFakeLlmServer({ model: "agent-model", policy: agentPolicy, latencyMs: options.agentLatencyMs ?? 0 });
  const optimizer = await startFakeLlmServer({ model: "opt-model", policy: options.optimizerPolicy ?? optimizerPolicy });
  let executor: AttemptExecutor;
  if (options.executor === "pool") {
    executor = createPoolExecutor({
      agentModule,
      workers: options.workers ?? 2,
      concurrency: options.concurrency ?? 4,
      logger: silentLogger,
    });
  } else {
    const agent = (await import(agentModule)).default;
    executor = createInProcessExecutor({ agent, concurrency: options.concurrency ?? 8, logger: silentLogger });
  }
  const runner = createRunner({ store: store.client, executor, pollWaitSeconds: 0.5, logger: silentLogger });
  const running = runner.run();
  return {
    store,
    agentLlm,
    optimizer,
    runner,
    base: () => ({
      store: store.client,
      optimizer: { baseUrl: optimizer.url, gradientModel: "opt-model", editModel: "opt-model" },
      resources: { llm: { kind: { case: "llm", value: { endpoint: agentLlm.url, model: "agent-model" } } } },
      logger: silentLogger,
    }),
    async close() {
      await runner.stop({ graceMs: 1_000 });
      await running;
      await executor.close();
      await agentLlm.close();
      await optimizer.close();
      await store.close();
    },
  };
}
