import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const repo = fileURLToPath(new URL("../..", import.meta.url));

/** Runs `agl <args>` from the sources; resolves with the exit code and both streams. */
export function agl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["bin/agl.js", ...args], {
      cwd: repo,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * `agl apo` on the room-booking example (relative paths, from the repository root) against an agent LLM serving
 * `agent-model` and an optimizer serving `opt-model`, with one runner thread; append the search's own options.
 */
export function roomExampleArgs(agentLlmUrl: string, optimizerUrl: string): string[] {
  const example = "examples/room-booking";
  return [
    "apo",
    `${example}/agent.ts`,
    "--train",
    `${example}/train.jsonl`,
    "--val",
    `${example}/val.jsonl`,
    "--prompt",
    `booking=@${example}/seed-prompt.txt`,
    "--var",
    "rooms",
    "--llm-model",
    "agent-model",
    "--llm-base-url",
    agentLlmUrl,
    "--optimizer-base-url",
    optimizerUrl,
    "--gradient-model",
    "opt-model",
    "--edit-model",
    "opt-model",
    "--workers",
    "1",
  ];
}
