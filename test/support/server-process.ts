import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const compiledEntry = "dist/cli/main.js";

/** A real `agl serve` process. */
export interface ServerProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM, then waits for the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, then waits for the process to be gone. */
  kill(): Promise<void>;
}

export interface ServerProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** Run the compiled CLI (`dist/`, after `make build`) rather than the sources through tsx, as benchmarks should. */
  compiled?: boolean;
  /** Options for node itself, before the entry (e.g. `--cpu-prof`, which NODE_OPTIONS does not accept). */
  nodeArgs?: string[];
  /** The `agl` command to run (default `serve`; `proxy` prints its "listening on" line too). */
  command?: "serve" | "proxy";
  /** The checkout whose CLI runs (default this one; benchmarks compare another, say the previous main). */
  root?: string;
  /** A command that runs the server in its place (`ip netns exec <ns>`), so that signals still reach it. */
  prefix?: string[];
}

/** Starts `agl serve <args> --port 0` (or another command) and resolves once it prints the address it listens on. */
export async function startServerProcess(args: string[], options: ServerProcessOptions = {}): Promise<ServerProcess> {
  const entry = options.compiled ? compiledEntry : "bin/agl.js";
  if (options.compiled) assertBuilt(options.root);
  const [command, ...commandArgs] = [
    ...(options.prefix ?? []),
    process.execPath,
    ...(options.nodeArgs ?? []),
    entry,
    options.command ?? "serve",
    "--port",
    "0",
    ...args,
  ];
  const child = spawn(command as string, commandArgs, {
    cwd: options.root ?? repoRoot,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => reject(new Error(`server did not start within 30 s:\n${stderr}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (\S+)/.exec(stdout);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stderr}`));
    });
  });
  const exited = once(child, "exit");
  return {
    url,
    pid: child.pid as number,
    child,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const [code] = (await exited) as [number | null];
      return code;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * Refuses a compiled CLI older than the sources it was built from: a benchmark would measure code that is no longer
 * there, and say nothing (`make build` rewrites every file of `dist/`). A benchmark calls it up front where other
 * runs come before its first server.
 */
export function assertBuilt(root = repoRoot): void {
  let built: number;
  try {
    built = statSync(join(root, compiledEntry)).mtimeMs;
  } catch {
    throw new Error(`${join(root, compiledEntry)} does not exist: run \`make build\` in ${root} first`);
  }
  const sources = join(root, "src");
  for (const file of readdirSync(sources, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts") || file.endsWith(".test.ts")) continue;
    if (statSync(join(sources, file)).mtimeMs > built) {
      throw new Error(`${join(root, "dist")} is older than ${join(sources, file)}: run \`make build\` in ${root} first`);
    }
  }
}
