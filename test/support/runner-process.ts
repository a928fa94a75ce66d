import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

/** A real `agl run` process. */
export interface RunnerProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or the signal that ended it). */
  exited: Promise<number | NodeJS.Signals | null>;
}

/**
 * Starts `node bin/agl.js run <args>` and resolves once it printed its start line. `prefix` runs it through another
 * command that ends by executing it in place (`ip netns exec <ns>`), so that signals still reach the runner.
 */
export async function startRunnerProcess(args: string[], env: NodeJS.ProcessEnv = {}, prefix: string[] = []): Promise<RunnerProcess> {
  const [command, ...commandArgs] = [...prefix, process.execPath, "bin/agl.js", "run", ...args];
  const child = spawn(command!, commandArgs, {
    cwd: repoRoot,
    env: { ...process.env, AGL_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, "exit").then(([code, signal]) => (code ?? signal) as number | NodeJS.Signals | null);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agl run did not start within 30 s:\n${stderr}`)), 30_000);
    const check = () => {
      if (/agl runner \S+ running/.test(stdout)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`agl run exited with ${code} before starting:\n${stderr}`));
    });
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Runs `node bin/agl.js <args>` to completion. */
export async function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["bin/agl.js", ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stdout, stderr };
}
