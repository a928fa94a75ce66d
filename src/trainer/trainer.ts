import type { JsonValue } from "@bufbuild/protobuf";
import type { Agent } from "../agent/agent.js";
import { createConsoleLogger, type Logger } from "../core/logger.js";
import type { Algorithm, Datasets } from "../algorithm/algorithm.js";
import { type BaselineReport, createBaseline } from "../algorithm/baseline.js";
import { createInProcessExecutor } from "../runner/in-process-executor.js";
import { createPoolExecutor } from "../runner/pool-executor.js";
import { createRunner, type RunnerOptions } from "../runner/runner.js";
import { createMemoryBackend } from "../store/backends/memory/memory-backend.js";
import type { StoreApi } from "../store/store-api.js";
import { createStore } from "../store/store.js";

/** An agent for the trainer: a module path or URL (runs on worker threads) or an agent object (runs on this thread). */
export type AgentSource = string | URL | Agent<unknown>;

/** Options of {@link Trainer}. */
export interface TrainerOptions<TReport = unknown> {
  /** Default: {@link createBaseline} (run every task once and report rewards). */
  algorithm?: Algorithm<TReport>;
  /** Worker threads for an agent module. Default 1. */
  workers?: number;
  /** Rollouts per worker (or on this thread, for an agent object) at once. Default 8. */
  concurrency?: number;
  /** Default: a fresh in-memory store, closed at the end. */
  store?: StoreApi;
  /** Further runner options (timeouts, heartbeats, …). */
  runner?: Partial<Omit<RunnerOptions, "store" | "executor">>;
  logger?: Logger;
}

/**
 * Wires an algorithm, a store and runners together in one process. `Trainer.dev(agent, dataset)` is the quickest way to
 * try an agent: an in-memory store, the agent on worker threads, and the Baseline algorithm reporting each rollout's
 * reward.
 *
 * @example
 * ```ts
 * const report = await Trainer.dev(new URL("./calculator.ts", import.meta.url), [{ question: "2+3", answer: 5 }]);
 * console.log(report.meanReward.train);
 * ```
 */
export class Trainer<TReport = BaselineReport> {
  constructor(private readonly options: TrainerOptions<TReport> = {}) {}

  /** Runs `agent` on `dataset` (train tasks, or `{ train, val }`) under the algorithm; resolves to its report. */
  async dev(agent: AgentSource, dataset: readonly JsonValue[] | Datasets): Promise<TReport> {
    const options = this.options;
    const logger = options.logger ?? createConsoleLogger({ prefix: "[trainer]" });
    const ownStore = options.store === undefined;
    const store = options.store ?? createStore({ backend: createMemoryBackend() });
    const concurrency = options.concurrency ?? 8;
    const executor =
      typeof agent === "string" || agent instanceof URL
        ? createPoolExecutor({ agentModule: String(agent), workers: options.workers ?? 1, concurrency, logger })
        : createInProcessExecutor({ agent, concurrency, logger });
    const runner = createRunner({ pollWaitSeconds: 0.5, logger, ...options.runner, store, executor });
    const running = runner.run();
    const algorithm = options.algorithm ?? (createBaseline() as unknown as Algorithm<TReport>);
    const datasets: Datasets = Array.isArray(dataset) ? { train: dataset as readonly JsonValue[] } : (dataset as Datasets);
    try {
      return await algorithm.run({ store, logger }, datasets);
    } finally {
      await runner.stop({ graceMs: 0 });
      await running;
      await executor.close();
      if (ownStore) await (store as ReturnType<typeof createStore>).close();
    }
  }

  /** `new Trainer(options).dev(agent, dataset)`. */
  static dev<R = BaselineReport>(
    agent: AgentSource,
    dataset: readonly JsonValue[] | Datasets,
    options: TrainerOptions<R> = {},
  ): Promise<R> {
    return new Trainer<R>(options).dev(agent, dataset);
  }
}
