import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import { AglError } from "../core/errors.js";
import { createConsoleLogger, type Logger } from "../core/logger.js";
import { type AbortKind, type AttemptExecutor, type AttemptHandle, type AttemptOutcome, unranOutcome } from "./attempt-task.js";
import { createHeartbeatBoard, readBoard, releaseSlot } from "./heartbeat-board.js";
import type { PoolTask, PoolWorkerData, RunnerMessage, WorkerMessage } from "./pool-protocol.js";

/** Options of {@link createPoolExecutor}. */
export interface PoolExecutorOptions {
  /** Path (or file URL) of the module exporting the agent; `.ts` modules load through tsx. */
  agentModule: string;
  /** The export holding the agent. Default: `default`, else `agent`. */
  exportName?: string;
  /** Worker threads. Default: the machine's available parallelism. */
  workers?: number;
  /** Rollouts each worker runs at once. Default 8. */
  concurrency?: number;
  /** A worker whose event loop shows no sign of life for this long is terminated. Default 10 s. */
  blockedWorkerMs?: number;
  logger?: Logger;
}

// From the sources, threads start at a bootstrap that registers tsx (Node 20 gives threads no loader hooks); built,
// at pool-entry.js. Both load pool-worker through import(), never require() (see pool-entry.ts).
const workerFile = new URL(import.meta.url.endsWith(".ts") ? "./pool-bootstrap.mjs" : "./pool-entry.js", import.meta.url);

/**
 * Runs attempts on a piscina pool: `workers` threads, each running up to `concurrency` rollouts on its own event loop.
 * A supervisor reads every thread's heartbeat from shared memory; a thread that stops responding gets no new
 * attempts, and one blocked longer than `blockedWorkerMs` is terminated: the attempts it was running end `lost` (an
 * infrastructure failure, retried as such), those queued on it that never started are handed back untouched, and
 * piscina starts a replacement.
 */
export function createPoolExecutor(options: PoolExecutorOptions): AttemptExecutor {
  const workers = options.workers ?? availableParallelism();
  const concurrency = options.concurrency ?? 8;
  const blockedMs = options.blockedWorkerMs ?? 10_000;
  const logger = options.logger ?? createConsoleLogger({ prefix: "[pool]" });
  const beatMs = Math.max(10, Math.min(250, Math.floor(blockedMs / 10)));
  const board = createHeartbeatBoard(Math.max(64, workers * 8));
  const agentModule = /^[a-z]+:/i.test(options.agentModule) ? options.agentModule : pathToFileURL(resolve(options.agentModule)).href;
  const workerData: PoolWorkerData = { agentModule, board, beatMs, ...(options.exportName ? { exportName: options.exportName } : {}) };
  // A thread whose stamp is older than this has stopped responding for now: it gets no new attempt, which would
  // only wait behind its blocked event loop (and be lost with it).
  const unresponsiveMs = Math.max(100, 2 * beatMs);
  const responsiveThreads = () => {
    const now = Date.now();
    return new Map(readBoard(board).map(({ threadId, lastBeatMs }) => [threadId, now - lastBeatMs <= unresponsiveMs]));
  };
  const pool = new Piscina<PoolTask, void>({
    filename: workerFile.href,
    minThreads: workers,
    maxThreads: workers,
    concurrentTasksPerWorker: concurrency,
    idleTimeout: Number.POSITIVE_INFINITY,
    // Atomics.wait would freeze a worker's event loop between tasks, and with it the rollouts it is running.
    atomics: "disabled",
    workerData,
    // The least busy thread that is responding and has room; none: the attempt waits in piscina's queue.
    loadBalancer: (_task, threads) => {
      const responsive = responsiveThreads();
      let best: (typeof threads)[number] | null = null;
      for (const thread of threads) {
        if (thread.terminating || thread.destroyed || thread.currentUsage >= concurrency || responsive.get(thread.id) === false) continue;
        if (!best || thread.currentUsage < best.currentUsage) best = thread;
      }
      return best;
    },
  });
  const killed = new Map<number, string>();
  let running = 0;
  let finished = 0;

  const supervisor = setInterval(
    () => {
      const now = Date.now();
      for (const { slot, threadId, lastBeatMs } of readBoard(board)) {
        const worker = pool.threads.find((t) => t.threadId === threadId);
        if (!worker) {
          releaseSlot(board, slot);
          continue;
        }
        const silentMs = now - lastBeatMs;
        if (silentMs <= blockedMs || killed.has(threadId)) continue;
        const reason = `its event loop was blocked for ${silentMs} ms (a synchronous loop in the agent?), so the worker thread was terminated`;
        killed.set(threadId, reason);
        releaseSlot(board, slot);
        logger.warn(`worker thread ${threadId}: ${reason}`);
        void worker.terminate();
      }
    },
    Math.max(10, Math.floor(blockedMs / 4)),
  );
  supervisor.unref();

  let ready: Promise<void> | undefined;
  return {
    capacity: workers * concurrency,
    ready() {
      ready ??= (pool.run(undefined as never, { name: "ping" }) as Promise<unknown>).then((failure) => {
        if (typeof failure === "string") throw new AglError("agent_load", failure);
      });
      return ready;
    },
    start(task, onSpans): AttemptHandle {
      const { port1, port2 } = new MessageChannel();
      let threadId: number | undefined;
      let settle!: (outcome: AttemptOutcome) => void;
      let fail!: (error: Error) => void;
      const done = new Promise<AttemptOutcome>((resolve, reject) => {
        settle = resolve;
        fail = reject;
      });
      running++;
      port1.on("message", (message: WorkerMessage) => {
        if (message.t === "started") threadId = message.threadId;
        else if (message.t === "spans") onSpans(message.spans);
        else settle(message.outcome);
      });
      pool.run({ task, port: port2 }, { transferList: [port2] }).then(
        // `done` travels on the task's own port; give it a moment if piscina's answer overtook it.
        () => setTimeout(() => fail(new Error("the worker finished the task without reporting its outcome")), 5_000).unref(),
        (error: unknown) => {
          const failure = `the worker thread failed: ${error instanceof Error ? error.message : String(error)}`;
          if (threadId === undefined) {
            // Queued on a thread that ended before running it: the attempt never started, so it goes back untouched.
            const reason = `handed back unstarted: ${failure}`;
            settle(unranOutcome("interrupted", { type: "Error", message: reason }));
            return;
          }
          const message = killed.get(threadId) ?? failure;
          settle(unranOutcome("lost", { type: "WorkerThreadLost", message }));
        },
      );
      const ended = done.finally(() => {
        running--;
        finished++;
        port1.close();
      });
      return {
        done: ended,
        abort: (kind: AbortKind) => port1.postMessage({ t: "abort", kind } satisfies RunnerMessage),
      };
    },
    stats: () => ({ pool_threads: pool.threads.length, pool_running: running, pool_finished: finished, pool_killed: killed.size }),
    async close() {
      clearInterval(supervisor);
      await pool.destroy();
    },
  };
}
