import { parseFlags, UsageError } from "./flags.js";
import { parseStoreConnection, type StoreConnection, storeConnectionFlags } from "./store-flags.js";

/** What `agl train` was asked to do. */
export interface TrainArgs {
  agentModule: string;
  trainer: "local" | "verl";
  /** JSONL task inputs; the local trainer's built-in task needs none. */
  dataset?: string;
  /** JSONL validation tasks, run as rollouts of mode val (never trained on). */
  valDataset?: string;
  /** An existing store (`baseUrl`); none starts one on SQLite at `database`, with the same token. */
  store: StoreConnection;
  database: string;
  steps?: number;
  n?: number;
  tasksPerStep?: number;
  model?: string;
  checkpointDir?: string;
  workers: number;
  concurrency: number;
  python: string;
  /** Passed to the trainer as they are (after `--`). */
  trainerArgs: string[];
  help: boolean;
}

export const TRAIN_USAGE = `Usage: agl train <agent-module> [options] [-- trainer options]

Trains the model an unchanged agent calls, by RL: starts the store (unless --store), the LLM proxy, a runner pool
running the agent, and the trainer, which serves the policy, enqueues rollouts, learns from the token ids the proxy
recorded and publishes each new version. Ends when the trainer does; stops everything it started.

Options:
  --trainer <local|verl>   local: CPU trainer with a small model (python -m agl_bridge.local, default);
                           verl: VERL's own trainer (python -m agl_bridge.verl) on GPU nodes, or on CPU when there
                           is no CUDA device (or with trainer.device=cpu after --); give its Hydra overrides after
                           --, data.train_files and data.val_files included (VERL's TaskRunner loads them)
  --dataset <file.jsonl>   task inputs, one JSON value a line (the local trainer's built-in task needs none)
  --val-dataset <file>     validation tasks (JSONL), run as rollouts of mode val before training and every few
                           steps (local: --test-freq after --; verl: trainer.test_freq); never trained on
  --store <url>            use this store instead of starting one
  --database <path>        SQLite file of the store started here (default ./agl-train.db)
  --token <token>          store token (default $AGL_TOKEN)
  --steps <k>              training steps
  --n <k>                  rollouts per task (one GRPO group)
  --tasks-per-step <k>     tasks per step
  --model <dir>            a local Hugging Face causal LM (local trainer default: a tiny model built here)
  --checkpoint-dir <dir>   where the trainer checkpoints (a restart resumes from it)
  --workers <n>            runner worker threads (default 1)
  --concurrency <m>        rollouts each worker runs at once (default 64)
  --python <path>          Python with agl_bridge installed (default $AGL_PYTHON, else python-bridge/.venv/bin/python)
  -h, --help               show this help
`;

function positive(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${flag} needs an integer ≥ 1, got "${value}"`);
  return n;
}

/** Parses the arguments after `train`. Throws {@link UsageError}. */
export function parseTrainArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, defaultPython = "python3"): TrainArgs {
  const split = argv.indexOf("--");
  const own = split >= 0 ? argv.slice(0, split) : [...argv];
  const trainerArgs = split >= 0 ? argv.slice(split + 1) : [];
  const parsed = parseFlags({
    args: own,
    allowPositionals: true,
    options: {
      trainer: { type: "string" },
      dataset: { type: "string" },
      "val-dataset": { type: "string" },
      ...storeConnectionFlags,
      database: { type: "string" },
      steps: { type: "string" },
      n: { type: "string" },
      "tasks-per-step": { type: "string" },
      model: { type: "string" },
      "checkpoint-dir": { type: "string" },
      workers: { type: "string" },
      concurrency: { type: "string" },
      python: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const { values, positionals } = parsed;
  const help = values.help === true;
  if (!help && positionals.length !== 1) throw new UsageError("give exactly one agent module");
  const trainer = values.trainer ?? "local";
  if (trainer !== "local" && trainer !== "verl") throw new UsageError(`--trainer is local or verl, got "${trainer}"`);
  if (!help && trainer === "verl" && values.dataset === undefined) throw new UsageError("--trainer verl needs --dataset");
  return {
    agentModule: positionals[0] ?? "",
    trainer,
    ...(values.dataset !== undefined ? { dataset: values.dataset } : {}),
    ...(values["val-dataset"] !== undefined ? { valDataset: values["val-dataset"] } : {}),
    store: parseStoreConnection(values, env, "own"),
    database: values.database ?? "./agl-train.db",
    ...(values.steps !== undefined ? { steps: positive(values.steps, "--steps") } : {}),
    ...(values.n !== undefined ? { n: positive(values.n, "--n") } : {}),
    ...(values["tasks-per-step"] !== undefined ? { tasksPerStep: positive(values["tasks-per-step"], "--tasks-per-step") } : {}),
    ...(values.model !== undefined ? { model: values.model } : {}),
    ...(values["checkpoint-dir"] !== undefined ? { checkpointDir: values["checkpoint-dir"] } : {}),
    workers: positive(values.workers, "--workers") ?? 1,
    concurrency: positive(values.concurrency, "--concurrency") ?? 64,
    python: values.python ?? env.AGL_PYTHON ?? defaultPython,
    trainerArgs,
    help,
  };
}
