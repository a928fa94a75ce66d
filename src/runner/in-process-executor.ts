import type { Agent } from "../agent/agent.js";
import type { Logger } from "../core/logger.js";
import type { AbortKind, AttemptExecutor, AttemptHandle } from "./attempt-task.js";
import { executeAttempt } from "./execute-attempt.js";

/** Options of {@link createInProcessExecutor}. */
export interface InProcessExecutorOptions {
  agent: Agent<unknown>;
  /** Attempts run at once on this thread's event loop. Default 1. */
  concurrency?: number;
  logger?: Logger;
}

/**
 * Runs attempts on the calling thread's event loop: the cheapest way to run I/O-bound agents, but a blocking agent
 * blocks the runner too (use the pool executor to survive that).
 */
export function createInProcessExecutor(options: InProcessExecutorOptions): AttemptExecutor {
  let running = 0;
  let finished = 0;
  return {
    capacity: options.concurrency ?? 1,
    start(task, onSpans): AttemptHandle {
      const controller = new AbortController();
      running++;
      const done = executeAttempt(options.agent, task, {
        onSpans,
        signal: controller.signal,
        ...(options.logger ? { logger: options.logger } : {}),
      }).finally(() => {
        running--;
        finished++;
      });
      return { done, abort: (kind: AbortKind) => controller.abort(kind) };
    },
    stats: () => ({ running, finished }),
    close: async () => {},
  };
}
