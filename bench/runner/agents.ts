/** Agents the runner bench loads on worker threads. */
import { rollout } from "../../src/agent/agent.js";

/** Does nothing: what is left is the framework. */
export const noop = rollout(() => undefined);

/** Awaits `task.ms` (an I/O-bound agent waiting on, say, an LLM) and returns a reward. */
export const waiter = rollout(async (task: { ms: number }) => {
  await new Promise((resolve) => setTimeout(resolve, task.ms));
  return 1;
});
