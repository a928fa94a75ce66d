/**
 * The demo agent (examples/rl-kind/agent.ts) behind a tool call that takes AGL_TOOL_MS (default 1500 ms) of waiting,
 * not computing: a rollout whose time goes to an environment rather than to the model, where asynchronous training
 * lets generation overlap the update (bench/async-overlap/run.sh).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { rollout } from "../../src/index.js";
import kind, { type KindTask } from "../../examples/rl-kind/agent.js";

const toolMs = Number(process.env.AGL_TOOL_MS ?? 1500);

export default rollout(async function slowTool(task: KindTask, resources, ctx) {
  await sleep(toolMs, undefined, { signal: ctx.signal });
  return kind.rollout(task, resources, ctx);
});
