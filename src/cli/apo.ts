import { writeFile } from "node:fs/promises";
import { createConsoleLogger } from "../core/logger.js";
import { AglError } from "../core/errors.js";
import type { ApoOptions } from "../algorithm/apo/apo-options.js";
import { formatReport } from "../algorithm/apo/apo-report.js";
import { runApo } from "../algorithm/apo/apo.js";
import { createStoreClient } from "../client/store-client.js";
import { AttemptStatus } from "../gen/agl/v1/types_pb.js";
import { createPoolExecutor } from "../runner/pool-executor.js";
import { createRunner } from "../runner/runner.js";
import { createMemoryBackend } from "../store/backends/memory/memory-backend.js";
import type { StoreApi } from "../store/store-api.js";
import { createStore } from "../store/store.js";
import type { ApoArgs } from "./apo-args.js";
import { loadDataset, loadPromptFile, loadTemplates } from "./apo-inputs.js";
import { createApoProgress } from "./apo-progress.js";

async function openStore(spec: ApoArgs["store"]): Promise<{ store: StoreApi; close(): Promise<void> }> {
  if (spec.kind === "url") {
    const client = createStoreClient(spec.connection);
    return { store: client, close: async () => client.close() };
  }
  // The native SQLite driver is loaded only when asked for.
  const backend =
    spec.kind === "sqlite"
      ? (await import("../store/backends/sqlite/sqlite-backend.js")).createSqliteBackend({ path: spec.path })
      : createMemoryBackend();
  const store = createStore({ backend });
  return { store, close: () => store.close() };
}

/**
 * Runs `agl apo`: reads the datasets and templates, opens the store, starts runners for the agent module (unless
 * `--no-runners`), runs APO with progress lines on stderr, prints the report on stdout and writes it as JSON.
 * Resolves to the exit code.
 */
export async function apo(args: ApoArgs): Promise<number> {
  const train = await loadDataset(args.train, "--train");
  const val = await loadDataset(args.val, "--val");
  const templates = await loadTemplates(args.prompts);
  const prompts: NonNullable<ApoOptions["prompts"]> = {};
  if (args.critiquePrompt) prompts.critique = [{ user: await loadPromptFile(args.critiquePrompt, "--critique-prompt") }];
  if (args.editPrompt) prompts.edit = [{ user: await loadPromptFile(args.editPrompt, "--edit-prompt") }];
  const write = (line: string) => process.stderr.write(`${line}\n`);
  if (args.store.kind === "memory")
    write("note: the store lives in this process's memory; pass --db FILE or --store URL to be able to resume this run");

  const { store, close } = await openStore(args.store);
  const executor =
    args.runners &&
    createPoolExecutor({ agentModule: args.agentModule, ...args.runners, ...(args.exportName ? { exportName: args.exportName } : {}) });
  const runner =
    executor && createRunner({ store, executor, pollWaitSeconds: 1, logger: createConsoleLogger({ prefix: "[runner]", level: "warn" }) });
  const running = runner?.run();
  const abort = new AbortController();
  const onSignal = () => abort.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const report = await runApo({
      store,
      templates: Object.fromEntries(
        Object.entries(templates).map(([name, template]) => [name, { template, engine: args.jinja ? "jinja" : "f-string" }]),
      ),
      train,
      val,
      optimizer: args.optimizer,
      ...(args.llm ? { resources: { llm: { kind: { case: "llm", value: { endpoint: args.llm.baseUrl, model: args.llm.model } } } } } : {}),
      variables: args.variables,
      beamWidth: args.beamWidth,
      branchFactor: args.branchFactor,
      rounds: args.rounds,
      gradientBatchSize: args.gradientBatchSize,
      valBatchSize: args.valBatchSize,
      runInitialValidation: args.baseline,
      budget: args.budget,
      seed: args.seed,
      ...(args.runId ? { runId: args.runId } : {}),
      ...(prompts.critique || prompts.edit ? { prompts } : {}),
      rolloutConfig: {
        maxAttempts: 3,
        retryCondition: [AttemptStatus.UNRESPONSIVE, AttemptStatus.TIMEOUT],
        unresponsiveSeconds: args.unresponsiveSeconds,
        ...(args.rolloutTimeoutSeconds === undefined ? {} : { timeoutSeconds: args.rolloutTimeoutSeconds }),
      },
      batchTimeoutSeconds: args.batchTimeoutSeconds,
      onEvent: args.quiet ? () => {} : createApoProgress(write),
      logger: createConsoleLogger({ prefix: "[apo]" }),
      signal: abort.signal,
    });
    const path = args.report ?? `apo-report-${report.runId}.json`;
    await writeFile(path, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(formatReport(report));
    process.stdout.write(`Report written to ${path}\n`);
    return 0;
  } catch (error) {
    if (error instanceof AglError && error.code === "aborted") {
      write("apo: interrupted; run again with the same --run-id (and a persistent store) to resume");
      return 130;
    }
    throw error;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await runner?.stop({ graceMs: 2_000 });
    await running;
    await executor?.close();
    await close();
  }
}
