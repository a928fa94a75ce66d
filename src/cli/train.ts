import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { TrainArgs } from "./train-args.js";
import { storeConnectionArgv } from "./store-flags.js";

const CLI = fileURLToPath(new URL("../../bin/agl.js", import.meta.url));

/** The Python of the repository's venv when there is one (a checkout), else `python3`. */
export function defaultPython(): string {
  const venv = fileURLToPath(new URL("../../python-bridge/.venv/bin/python", import.meta.url));
  return existsSync(venv) ? venv : "python3";
}

/** Starts `command` and resolves with the first URL of the first output line matching `ready`. */
function startService(name: string, command: string, args: string[], ready: RegExp, children: ChildProcess[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let buffer = "";
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString();
      const line = buffer.split("\n").find((l) => ready.test(l));
      const url = line?.match(/https?:\/\/[^\s)]+/)?.[0];
      if (url) {
        child.stdout?.off("data", onData);
        resolve(url);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => process.stderr.write(`[${name}] ${chunk.toString()}`));
    child.once("exit", (code) => reject(new Error(`${name} exited (code ${code}) before it was ready: ${buffer.trim()}`)));
    child.once("error", reject);
  });
}

function trainerCommand(args: TrainArgs, store: string, proxy: string): string[] {
  const common = (flag: string, value: string | number | undefined) => (value === undefined ? [] : [flag, String(value)]);
  if (args.trainer === "verl") {
    return [
      "-m",
      "agl_bridge.verl",
      `agl.store=${store}`,
      `agl.proxy=${proxy}/v1`,
      `agl.train_dataset=${args.dataset}`,
      ...(args.valDataset ? [`agl.val_dataset=${args.valDataset}`] : []),
      ...(args.steps ? [`trainer.total_training_steps=${args.steps}`] : []),
      ...(args.n ? [`actor_rollout_ref.rollout.n=${args.n}`] : []),
      ...(args.tasksPerStep ? [`data.train_batch_size=${args.tasksPerStep}`] : []),
      ...(args.model ? [`actor_rollout_ref.model.path=${args.model}`] : []),
      ...(args.checkpointDir ? [`trainer.default_local_dir=${args.checkpointDir}`] : []),
      ...args.trainerArgs,
    ];
  }
  return [
    "-m",
    "agl_bridge.local",
    "--store",
    store,
    "--proxy",
    `${proxy}/v1`,
    ...common("--dataset", args.dataset),
    ...common("--val-dataset", args.valDataset),
    ...common("--steps", args.steps),
    ...common("--n", args.n),
    ...common("--tasks-per-step", args.tasksPerStep),
    ...common("--model", args.model),
    ...common("--checkpoint-dir", args.checkpointDir),
    ...args.trainerArgs,
  ];
}

/**
 * Runs `agl train`: store (unless given), LLM proxy, runner pool and trainer as child processes; resolves to the
 * trainer's exit code once it ends, after stopping the others. SIGINT/SIGTERM stop the trainer first (it resumes from
 * its checkpoint next time).
 */
export async function train(args: TrainArgs): Promise<number> {
  const children: ChildProcess[] = [];
  const { token } = args.store;
  const env = { ...process.env, ...(token ? { AGL_TOKEN: token } : {}) };
  const stopAll = () => {
    for (const child of children.reverse()) if (child.exitCode === null) child.kill("SIGTERM");
  };
  try {
    const store =
      args.store.baseUrl ??
      (await startService(
        "store",
        process.execPath,
        [CLI, "serve", "--database", args.database, "--port", "0", ...(token ? ["--token", token] : [])],
        /agl store listening on/,
        children,
      ));
    process.stderr.write(`agl train: store ${store}\n`);
    const connection = { ...args.store, baseUrl: store };
    const proxy = await startService(
      "proxy",
      process.execPath,
      [CLI, "proxy", ...storeConnectionArgv(connection), "--port", "0"],
      /agl proxy listening on/,
      children,
    );
    process.stderr.write(`agl train: proxy ${proxy}\n`);
    const runner = spawn(
      process.execPath,
      [
        CLI,
        "run",
        args.agentModule,
        ...storeConnectionArgv(connection),
        "--workers",
        String(args.workers),
        "--concurrency",
        String(args.concurrency),
      ],
      { stdio: ["ignore", "ignore", "pipe"], env },
    );
    children.push(runner);
    // The runner's own errors (an agent that fails to import, a rollout that fails) are shown; its last lines say
    // why, should it exit while the trainer still runs.
    const runnerTail: string[] = [];
    runner.stderr?.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      runnerTail.push(...text.split("\n").filter((l) => l.trim() !== ""));
      runnerTail.splice(0, Math.max(0, runnerTail.length - 20));
      if (/error|fail|cannot/i.test(text)) process.stderr.write(`[runner] ${text}`);
    });
    process.stderr.write(`agl train: runner pool for ${args.agentModule}; trainer ${args.trainer}\n`);
    const trainer = spawn(args.python, trainerCommand(args, store, proxy), { stdio: "inherit", env });
    children.push(trainer);
    let stopping = false;
    const forward = (signal: NodeJS.Signals) => {
      stopping = true;
      trainer.kill(signal);
    };
    process.on("SIGINT", forward);
    process.on("SIGTERM", forward);
    const code = await new Promise<number>((resolve, reject) => {
      trainer.once("exit", (c, signal) => resolve(c ?? (signal ? 130 : 1)));
      trainer.once("error", reject);
      runner.once("exit", (c, signal) => {
        if (stopping || trainer.exitCode !== null || trainer.signalCode !== null) return;
        const why = runnerTail.slice(-5).join("\n  ") || "(it printed nothing)";
        process.stderr.write(
          `agl train: the runner pool exited (${signal ?? `code ${c}`}) while the trainer was running, so no rollout can run: stopping.\n  ${why}\n`,
        );
        trainer.kill("SIGTERM");
        resolve(c || 1);
      });
    });
    process.off("SIGINT", forward);
    process.off("SIGTERM", forward);
    return code;
  } finally {
    stopAll();
  }
}
