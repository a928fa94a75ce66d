import type { MessagePort } from "node:worker_threads";
import type { Span } from "../gen/agl/v1/types_pb.js";
import type { AbortKind, AttemptOutcome, AttemptTask } from "./attempt-task.js";

/** What the pool hands a worker thread at start-up (`workerData`). */
export interface PoolWorkerData {
  agentModule: string;
  exportName?: string;
  board: SharedArrayBuffer;
  beatMs: number;
}

/** One piscina task: the attempt, and the port the attempt talks over. */
export interface PoolTask {
  task: AttemptTask;
  port: MessagePort;
}

/** Worker → runner, in order on the task's port; `done` is always last. */
export type WorkerMessage = { t: "started"; threadId: number } | { t: "spans"; spans: Span[] } | { t: "done"; outcome: AttemptOutcome };

/** Runner → worker. */
export type RunnerMessage = { t: "abort"; kind: AbortKind };
