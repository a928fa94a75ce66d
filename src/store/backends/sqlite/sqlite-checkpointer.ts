import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type { Logger } from "../../../core/logger.js";

/**
 * WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside the COMMIT that crosses the WAL's
 * size threshold: it copies pages back into the database file and fsyncs both files on the one thread that serves
 * every call, and the COMMITs after it stall while the kernel writes those pages back (timed around COMMIT during
 * `bench/store` runs: ~50 of ~330 COMMITs took 10–20 ms, against 1–7 with this thread). Here a second connection, on
 * its own thread, runs passive checkpoints (they never block writers) shortly after commits, and the serving
 * connection stops checkpointing once that thread is up.
 */
export interface Checkpointer {
  /** Stops the thread; resolves once its connection is closed (before the serving one closes, so that one cleans up). */
  stop(): Promise<void>;
}

const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma("busy_timeout = 5000");
let seen = -1;
const timer = setInterval(() => {
  try {
    // data_version changes when another connection commits: checkpoint only after new writes.
    const version = db.pragma("data_version", { simple: true });
    if (version === seen) return;
    seen = version;
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch (error) {
    parentPort.postMessage({ error: String(error && error.message || error) });
  }
}, workerData.intervalMs);
parentPort.on("message", () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
parentPort.postMessage({ ready: true });
`;

export interface CheckpointerOptions {
  path: string;
  /** How often the thread looks for new commits (default 50 ms). */
  intervalMs?: number;
  /** Called once the thread checkpoints, and with false if it stops on its own (the caller checkpoints again). */
  onActive(active: boolean): void;
  logger: Logger;
}

export function startCheckpointer(options: CheckpointerOptions): Checkpointer {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(workerSource, {
    eval: true,
    // Not the parent's flags: with `--input-type=module` this CommonJS source would not run.
    execArgv: [],
    workerData: { driver, path: options.path, intervalMs: options.intervalMs ?? 50 },
  });
  worker.unref();
  let stopping = false;
  let lastError = "";
  worker.on("message", (message: { ready?: boolean; error?: string }) => {
    if (message.ready) options.onActive(true);
    else if (message.error && message.error !== lastError) {
      lastError = message.error;
      options.logger.warn(`sqlite: background checkpoint failed: ${message.error}`);
    }
  });
  const exited = new Promise<void>((resolve) => {
    worker.once("error", (error) => options.logger.warn(`sqlite: checkpoint thread failed: ${error.message}`));
    worker.once("exit", () => {
      if (!stopping) options.onActive(false);
      resolve();
    });
  });
  return {
    stop() {
      stopping = true;
      // Unreferenced so that it never keeps a process alive, but awaited here: keep the process up until it is gone.
      worker.ref();
      worker.postMessage("stop");
      return exited;
    },
  };
}
