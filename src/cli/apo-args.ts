import type { OptimizerOptions } from "../algorithm/apo/apo-options.js";
import { checkUrl, integer, parseFlags, UsageError } from "./flags.js";
import { parseStoreConnection, type StoreConnection, storeConnectionFlags } from "./store-flags.js";

/** What `agl apo` was asked to do (files not read yet). */
export interface ApoArgs {
  agentModule: string;
  exportName?: string;
  train: string;
  val: string;
  /** NAME → template text, or `@path` to read it from a file. */
  prompts: [string, string][];
  jinja: boolean;
  variables: string[];
  beamWidth: number;
  branchFactor: number;
  rounds: number;
  gradientBatchSize: number;
  valBatchSize: number;
  baseline: boolean;
  budget: { rollouts?: number; optimizerCalls?: number; tokens?: number };
  seed: number;
  runId?: string;
  optimizer: OptimizerOptions;
  critiquePrompt?: string;
  editPrompt?: string;
  llm?: { baseUrl: string; model: string };
  store: { kind: "url"; connection: StoreConnection } | { kind: "sqlite"; path: string } | { kind: "memory" };
  runners: { workers: number; concurrency: number } | undefined;
  unresponsiveSeconds: number;
  rolloutTimeoutSeconds?: number;
  batchTimeoutSeconds: number;
  report?: string;
  quiet: boolean;
  help: boolean;
}

/** The help text of `agl apo`. */
export const APO_USAGE = `Usage: agl apo <agent-module> --train FILE --val FILE --prompt NAME=TEMPLATE [options]

Optimizes the agent's prompt templates by beam search with textual gradients (APO), scoring every candidate through
real rollouts. Datasets are JSON arrays or JSONL files of tasks. The best prompt is published as the latest resource.

Prompts and data:
  --prompt NAME=TEMPLATE      a template to optimize (repeatable); NAME=@FILE reads it from a file
  --jinja                     the templates use Jinja ({{ name }}) rather than f-string ({name}) syntax
  --var NAME                  a template variable the agent supplies besides the task's fields (repeatable)
  --export NAME               the module's export holding the agent (default: default, else agent)
Search:
  --beam N                    candidates kept per round, B (default 4)
  --branch N                  children per parent per round, F (default 4)
  --rounds N                  rounds (default 3)
  --batch N                   training tasks per critique, G (default 4)
  --val-batch N               validation tasks per candidate per round, V (default 16)
  --no-baseline               do not score the seed on the full validation set first
  --seed N                    seed of every random choice (default 0)
  --run-id ID                 name of the run; an existing run with this id is resumed
Budget (hard limits; a warning up front when one round does not fit):
  --budget-rollouts N         rollouts of every kind
  --budget-calls N            optimizer LLM calls
  --budget-tokens N           optimizer LLM tokens
Optimizer LLM (any OpenAI-compatible endpoint):
  --optimizer-base-url URL    default $AGL_OPTIMIZER_BASE_URL, $OPENAI_BASE_URL, else https://api.openai.com/v1
  --optimizer-api-key KEY     default $AGL_OPTIMIZER_API_KEY, else $OPENAI_API_KEY
  --gradient-model NAME       writes the critiques (default gpt-5-mini)
  --edit-model NAME           writes the edited templates (default gpt-4.1-mini)
  --temperature T             sampling temperature of both (default: the endpoint's)
  --max-completion-tokens N   cap on each optimizer answer
  --optimizer-concurrency N   optimizer calls in flight (default 4)
  --critique-prompt FILE      our critique prompt replaced by FILE ({{template}}, {{experiments}}, … filled in)
  --edit-prompt FILE          our edit prompt replaced by FILE ({{template}}, {{critique}}, {{placeholders}})
Agent LLM:
  --llm-model NAME            publish an LLM resource "llm" with this model for the agent
  --llm-base-url URL          its endpoint (default $OPENAI_BASE_URL)
Store and runners:
  --store URL                 use a running store (agl serve); default: one in this process
  --token TOKEN               bearer token of that store (default $AGL_TOKEN)
  --db FILE                   keep the in-process store in SQLite, so the run survives a restart
  --workers N                 runner worker threads (default 2)
  --concurrency N             rollouts per worker at once (default 8)
  --no-runners                start no runners here (runners elsewhere serve --store)
  --unresponsive-seconds S    a rollout whose runner went silent this long is retried (default 60)
  --rollout-timeout S         a rollout running longer is timed out and retried (default: none)
  --batch-timeout S           longest wait for one batch of rollouts (default 3600)
Output:
  --report FILE               the final report as JSON (default apo-report-<run-id>.json)
  --quiet                     no progress lines
  -h, --help                  show this help
`;

const number = (text: string | undefined, flag: string, min = 0): number | undefined => {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || value < min)
    throw new UsageError(`${flag} must be a number ≥ ${min}, got "${text}"`);
  return value;
};
const int = (text: string | undefined, flag: string, fallback: number, min = 1) =>
  integer(text ?? String(fallback), flag, min, 1_000_000_000);

/** Parses the arguments after `apo`; `env` supplies endpoint defaults. Throws {@link UsageError}. */
export function parseApoArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ApoArgs {
  const s = { type: "string" } as const;
  const b = { type: "boolean" } as const;
  const parsed = parseFlags({
    args: [...argv],
    allowPositionals: true,
    options: {
      train: s,
      val: s,
      prompt: { type: "string", multiple: true },
      jinja: b,
      var: { type: "string", multiple: true },
      export: s,
      beam: s,
      branch: s,
      rounds: s,
      batch: s,
      "val-batch": s,
      "no-baseline": b,
      seed: s,
      "run-id": s,
      "budget-rollouts": s,
      "budget-calls": s,
      "budget-tokens": s,
      "optimizer-base-url": s,
      "optimizer-api-key": s,
      "gradient-model": s,
      "edit-model": s,
      temperature: s,
      "max-completion-tokens": s,
      "optimizer-concurrency": s,
      "critique-prompt": s,
      "edit-prompt": s,
      "llm-model": s,
      "llm-base-url": s,
      ...storeConnectionFlags,
      db: s,
      workers: s,
      concurrency: s,
      "no-runners": b,
      "unresponsive-seconds": s,
      "rollout-timeout": s,
      "batch-timeout": s,
      report: s,
      quiet: b,
      help: { type: "boolean", short: "h" },
    },
  });
  const { values: v, positionals } = parsed;
  const help = v.help === true;
  if (help) return { help } as ApoArgs;
  if (positionals.length !== 1)
    throw new UsageError(
      positionals.length === 0 ? "the agent module is missing" : `one agent module expected, got ${positionals.join(" ")}`,
    );
  if (!v.train) throw new UsageError("--train FILE is required");
  if (!v.val) throw new UsageError("--val FILE is required");
  const prompts = (v.prompt ?? []).map((p): [string, string] => {
    const at = p.indexOf("=");
    if (at <= 0) throw new UsageError(`--prompt takes NAME=TEMPLATE, got "${p}"`);
    return [p.slice(0, at), p.slice(at + 1)];
  });
  if (prompts.length === 0) throw new UsageError("at least one --prompt NAME=TEMPLATE is required");
  if (v.store && v.db) throw new UsageError("--store and --db exclude each other");
  if (v["no-runners"] && !v.store)
    throw new UsageError("--no-runners needs --store: with a store in this process, only runners here can serve it");
  const optimizerBaseUrl = v["optimizer-base-url"] ?? env.AGL_OPTIMIZER_BASE_URL ?? env.OPENAI_BASE_URL ?? "https://api.openai.com/v1";
  checkUrl(optimizerBaseUrl, "--optimizer-base-url");
  const connection = parseStoreConnection(v, env, "own");
  const apiKey = v["optimizer-api-key"] ?? env.AGL_OPTIMIZER_API_KEY ?? env.OPENAI_API_KEY;
  let llm: ApoArgs["llm"];
  if (v["llm-model"]) {
    const baseUrl = v["llm-base-url"] ?? env.OPENAI_BASE_URL;
    if (!baseUrl) throw new UsageError("--llm-model needs --llm-base-url or OPENAI_BASE_URL");
    checkUrl(baseUrl, "--llm-base-url");
    llm = { baseUrl, model: v["llm-model"] };
  } else if (v["llm-base-url"]) throw new UsageError("--llm-base-url goes with --llm-model");
  const budget: ApoArgs["budget"] = {};
  const rollouts = number(v["budget-rollouts"], "--budget-rollouts");
  const calls = number(v["budget-calls"], "--budget-calls");
  const tokens = number(v["budget-tokens"], "--budget-tokens");
  if (rollouts !== undefined) budget.rollouts = rollouts;
  if (calls !== undefined) budget.optimizerCalls = calls;
  if (tokens !== undefined) budget.tokens = tokens;
  const temperature = number(v.temperature, "--temperature");
  const maxTokens = v["max-completion-tokens"] === undefined ? undefined : int(v["max-completion-tokens"], "--max-completion-tokens", 0);
  const rolloutTimeout = number(v["rollout-timeout"], "--rollout-timeout");
  return {
    agentModule: positionals[0] as string,
    ...(v.export ? { exportName: v.export } : {}),
    train: v.train,
    val: v.val,
    prompts,
    jinja: v.jinja === true,
    variables: v.var ?? [],
    beamWidth: int(v.beam, "--beam", 4),
    branchFactor: int(v.branch, "--branch", 4),
    rounds: int(v.rounds, "--rounds", 3, 0),
    gradientBatchSize: int(v.batch, "--batch", 4),
    valBatchSize: int(v["val-batch"], "--val-batch", 16),
    baseline: v["no-baseline"] !== true,
    budget,
    seed: int(v.seed, "--seed", 0, 0),
    ...(v["run-id"] ? { runId: v["run-id"] } : {}),
    optimizer: {
      baseUrl: optimizerBaseUrl,
      ...(apiKey ? { apiKey } : {}),
      ...(v["gradient-model"] ? { gradientModel: v["gradient-model"] } : {}),
      ...(v["edit-model"] ? { editModel: v["edit-model"] } : {}),
      ...(temperature === undefined ? {} : { temperature }),
      ...(maxTokens === undefined ? {} : { maxCompletionTokens: maxTokens }),
      ...(v["optimizer-concurrency"] ? { concurrency: int(v["optimizer-concurrency"], "--optimizer-concurrency", 4) } : {}),
    },
    ...(v["critique-prompt"] ? { critiquePrompt: v["critique-prompt"] } : {}),
    ...(v["edit-prompt"] ? { editPrompt: v["edit-prompt"] } : {}),
    ...(llm ? { llm } : {}),
    store: connection.baseUrl ? { kind: "url", connection } : v.db ? { kind: "sqlite", path: v.db } : { kind: "memory" },
    runners: v["no-runners"] ? undefined : { workers: int(v.workers, "--workers", 2), concurrency: int(v.concurrency, "--concurrency", 8) },
    unresponsiveSeconds: number(v["unresponsive-seconds"], "--unresponsive-seconds", 0.1) ?? 60,
    ...(rolloutTimeout === undefined ? {} : { rolloutTimeoutSeconds: rolloutTimeout }),
    batchTimeoutSeconds: number(v["batch-timeout"], "--batch-timeout", 1) ?? 3_600,
    ...(v.report ? { report: v.report } : {}),
    quiet: v.quiet === true,
    help,
  };
}
