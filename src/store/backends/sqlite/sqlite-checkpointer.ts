import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { Logger } from "../../../core/logger.js";

/**
 * WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside the COMMIT that crosses the WAL's
 * size threshold: it copies pages back into the database file and fsyncs both files on the one thread that serves
 * every call, and the COMMITs after it stall while the kernel writes those pages back (timed around COMMIT during
 * `bench/store` runs: ~50 of ~330 COMMITs took 10–20 ms, against 1–7 with this thread). Here a second connection, on
 * its own thread, runs passive checkpoints (they never block writers) within 250 ms of commits, and the serving
 * connection stops checkpointing once that thread is up.
 *
 * A writer restarts the WAL from its beginning only once a checkpoint has copied all of it; under writes that never
 * pause, no checkpoint catches up, and the WAL only grows (340 MB in 10 s of `bench/store`). Past `restartFrames` the
 * thread says so, and the backend holds its next transaction until the thread has caught up (`catchUp`).
 */
export interface Checkpointer {
  /**
   * Checkpoints now; resolves true when that copied the whole WAL into the database, so that the next transaction
   * restarts the WAL from its beginning (false: a reader kept some of it, or the thread is gone).
   */
  catchUp(): Promise<boolean>;
  /** Stops the thread; resolves once its connection is closed (before the serving one closes, so that one cleans up). */
  stop(): Promise<void>;
}

const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 5000");
const restartFrames = workerData.restartFrames ?? Math.ceil(workerData.restartBytes / db.pragma("page_size", { simple: true }));
let seen = -1;
/** A passive checkpoint; returns whether it copied every frame of the WAL. */
const checkpoint = () => {
  const [{ log, checkpointed }] = db.pragma("wal_checkpoint(PASSIVE)");
  if (log >= restartFrames) parentPort.postMessage({ walFrames: log });
  return log === checkpointed;
};
const timer = setInterval(() => {
  try {
    // data_version changes when another connection commits: checkpoint only after new writes.
    const version = db.pragma("data_version", { simple: true });
    if (version === seen) return;
    seen = version;
    checkpoint();
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.message || error) });
  }
}, workerData.intervalMs);
parentPort.on("message", (message) => {
  if (message === "catch-up") {
    let caughtUp = false;
    try {
      caughtUp = checkpoint();
    } catch (error) {
      parentPort.postMessage({ error: String(error && error.message || error) });
    }
    parentPort.postMessage({ caughtUp });
    return;
  }
  clearInterval(timer);
  db.close();
  parentPort.close();
});
parentPort.postMessage({ ready: true });
`;

export interface CheckpointerOptions {
  path: string;
  /**
   * How often the thread looks for new commits (default 250 ms). A checkpoint copies each page written since the last
   * one, and the pages every commit writes (an index's last leaf, the tables' ends) once per checkpoint: on `make
   * demo`'s workload, checkpoints every 50 ms cost the store 33–41 µs a rollout more than every 250 or 500 ms.
   */
  intervalMs?: number;
  /** Called once the thread checkpoints, and with false if it stops on its own (the caller checkpoints again). */
  onActive(active: boolean): void;
  /** WAL frames from which the thread asks, through `onLongWal`, for a pause to restart the WAL (default: 64 MiB of them). */
  restartFrames?: number;
  /** Called when a checkpoint finds the WAL at `restartFrames` or more: time to `catchUp()` between transactions. */
  onLongWal?(): void;
  logger: Logger;
}

export function startCheckpointer(options: CheckpointerOptions): Checkpointer {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(workerSource, {
    eval: true,
    // Not the parent's flags: with `--input-type=module` this CommonJS source would not run.
    execArgv: [],
    workerData: {
      driver,
      path: options.path,
      intervalMs: options.intervalMs ?? 250,
      restartFrames: options.restartFrames,
      restartBytes: 64 << 20,
    },
  });
  worker.unref();
  let stopping = false;
  let gone = false;
  let lastError = "";
  /** Callers of `catchUp` waiting for the thread's answer, in order; the thread is referenced while there are any. */
  const caughtUp: Array<(done: boolean) => void> = [];
  worker.on("message", (message: { ready?: boolean; error?: string; walFrames?: number; caughtUp?: boolean }) => {
    if (message.ready) options.onActive(true);
    else if (message.walFrames !== undefined) options.onLongWal?.();
    else if (message.caughtUp !== undefined) {
      caughtUp.shift()?.(message.caughtUp);
      if (caughtUp.length === 0 && !stopping) worker.unref();
    } else if (message.error && message.error !== lastError) {
      lastError = message.error;
      options.logger.warn(`sqlite: background checkpoint failed: ${message.error}`);
    }
  });
  const exited = new Promise<void>((resolve) => {
    worker.once("error", (error) => options.logger.warn(`sqlite: checkpoint thread failed: ${error.message}`));
    worker.once("exit", () => {
      gone = true;
      if (!stopping) options.onActive(false);
      for (const done of caughtUp.splice(0)) done(false);
      resolve();
    });
  });
  return {
    catchUp() {
      if (stopping || gone) return Promise.resolve(false);
      // A transaction waits for the answer: like `stop`, keep the process up until it comes.
      worker.ref();
      worker.postMessage("catch-up");
      return new Promise((resolve) => caughtUp.push(resolve));
    },
    stop() {
      stopping = true;
      // Unreferenced so that it never keeps a process alive, but awaited here: keep the process up until it is gone.
      worker.ref();
      worker.postMessage("stop");
      return exited;
    },
  };
}
