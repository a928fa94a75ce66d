/**
 * The module each pool worker thread loads: it stamps the heartbeat board from its event loop, imports the user's
 * agent module once, and runs attempts (many at a time) as piscina tasks, talking to the runner over each task's port.
 */
import { threadId, workerData } from "node:worker_threads";
import type { Agent } from "../agent/agent.js";
import { AglError, errorInfo } from "../core/errors.js";
import { trustCaFileFromEnv } from "../core/tls.js";
import { loadAgent } from "../agent/load-agent.js";
import { registerAgentLoaders } from "../agent/module-loaders.js";
import { type AbortKind, unranOutcome } from "./attempt-task.js";
import { executeAttempt } from "./execute-attempt.js";
import { beat, claimSlot } from "./heartbeat-board.js";
import type { PoolTask, PoolWorkerData, RunnerMessage, WorkerMessage } from "./pool-protocol.js";

// The default CA is per thread: `agl run --ca-file` sets it in the environment threads inherit.
trustCaFileFromEnv();
const data = workerData as PoolWorkerData;
const slot = claimSlot(data.board, threadId);
if (slot >= 0) setInterval(() => beat(data.board, slot), data.beatMs).unref();

/** Loads the agent, registering tsx and ES-module loading first (Node 20 gives threads no loader hooks of their own). */
async function load(): Promise<Agent<unknown>> {
  await registerAgentLoaders(data.agentModule);
  return loadAgent(data.agentModule, data.exportName);
}

const agent: Promise<Agent<unknown> | AglError> = load().catch((error: unknown) => AglError.from(error, "agent_load"));

/** Resolves once the agent module is loaded: undefined, or why it could not be. */
export async function ping(): Promise<string | undefined> {
  const loaded = await agent;
  return loaded instanceof Error ? loaded.message : undefined;
}

/** Runs one attempt; its outcome goes over the task's port, after every span batch. */
export default async function runPoolTask({ task, port }: PoolTask): Promise<void> {
  const post = (message: WorkerMessage) => port.postMessage(message);
  post({ t: "started", threadId });
  const loaded = await agent;
  if (loaded instanceof Error) {
    post({ t: "done", outcome: unranOutcome("failed", errorInfo(loaded)) });
    port.close();
    return;
  }
  const controller = new AbortController();
  port.on("message", (message: RunnerMessage) => {
    if (message.t === "abort") controller.abort(message.kind satisfies AbortKind);
  });
  const outcome = await executeAttempt(loaded, task, {
    onSpans: (spans) => post({ t: "spans", spans }),
    signal: controller.signal,
  });
  post({ t: "done", outcome });
  port.close();
}
