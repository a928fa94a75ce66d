import { fromJson, type JsonObject, type JsonValue, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { spansToMessages } from "../../adapter/messages-view.js";
import { type Rollout, type RolloutConfigSchema, RolloutMode, RolloutStatus } from "../../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../store/store-api.js";
import { AglError } from "../../core/errors.js";
import { createLimiter } from "./limiter.js";
import type { OutcomeStatus, RolloutOutcome } from "./rollout-outcome.js";

/** One batch to evaluate: tasks run against one resources snapshot. */
export interface EvaluationRequest {
  /** Unique and deterministic within the run; becomes the rollouts' group id, so a resumed run finds the batch. */
  key: string;
  resourcesId: string;
  mode: "train" | "val";
  tasks: readonly { index: number; input: JsonValue }[];
  /** Read the rollouts' conversations (training batches feed the critique). */
  withMessages: boolean;
}

/** Runs batches of tasks and reports their outcomes: the seam between APO and whatever executes rollouts. */
export interface RolloutEvaluator {
  evaluate(request: EvaluationRequest, signal?: AbortSignal): Promise<RolloutOutcome[]>;
}

/** Options of {@link createStoreEvaluator}. */
export interface StoreEvaluatorOptions {
  store: StoreApi;
  /** Stored in each rollout's metadata (`apo_run`). */
  runId: string;
  /** Look for a batch already enqueued under the same key before enqueuing it (after a restart). */
  resume: boolean;
  /** Retry and timeout policy of each rollout. */
  rolloutConfig?: MessageInitShape<typeof RolloutConfigSchema>;
  /** Longest wait for one batch; rollouts still unfinished are cancelled and score 0. Default 3,600 s. */
  batchTimeoutSeconds?: number;
  /** Called as rollouts of a batch finish. */
  onProgress?(key: string, finished: number, total: number): void;
  /** Called when rollouts of a batch were still unfinished at the batch timeout (they are cancelled). */
  onLate?(key: string, late: number, timeoutSeconds: number): void;
  /** Rollouts read at once when collecting spans. Default 16. */
  readConcurrency?: number;
}

/** Rollouts per WaitForRollouts call. */
const waitChunkSize = 64;

const terminal: Partial<Record<RolloutStatus, OutcomeStatus>> = {
  [RolloutStatus.SUCCEEDED]: "succeeded",
  [RolloutStatus.FAILED]: "failed",
  [RolloutStatus.CANCELLED]: "cancelled",
};

/**
 * Evaluates batches through the store: enqueues one rollout per task with the snapshot's id (runners anywhere pick
 * them up, in parallel), waits server-side until they finish, and reads each rollout's final reward, feedback and
 * conversations from its spans.
 */
export function createStoreEvaluator(options: StoreEvaluatorOptions): RolloutEvaluator {
  const { store } = options;
  const timeoutMs = (options.batchTimeoutSeconds ?? 3_600) * 1000;

  const enqueue = async (request: EvaluationRequest): Promise<Rollout[]> => {
    if (options.resume) {
      const { rollouts } = await store.queryRollouts({ groupId: request.key });
      if (rollouts.length >= request.tasks.length) return rollouts.slice(0, request.tasks.length);
    }
    const { rollouts } = await store.enqueueRollouts({
      rollouts: request.tasks.map((task) => ({
        input: fromJson(ValueSchema, task.input),
        mode: request.mode === "train" ? RolloutMode.TRAIN : RolloutMode.VAL,
        resourcesId: request.resourcesId,
        groupId: request.key,
        metadata: { apo_run: options.runId, apo_batch: request.key, task_index: task.index },
        ...(options.rolloutConfig ? { config: options.rolloutConfig } : {}),
      })),
    });
    return rollouts;
  };

  const read = async (
    rollout: Rollout | undefined,
    id: string,
    index: number,
    input: JsonValue,
    withMessages: boolean,
  ): Promise<RolloutOutcome> => {
    const status: OutcomeStatus = rollout ? (terminal[rollout.status] ?? "unfinished") : "unfinished";
    const outcome: RolloutOutcome = { rolloutId: id, taskIndex: index, input, status, reward: undefined, feedback: [], conversations: [] };
    const error = (rollout?.latestAttempt?.metadata as JsonObject | undefined)?.error as { message?: string } | undefined;
    if (error?.message) outcome.error = error.message;
    if (!rollout?.latestAttempt) return outcome;
    const { spans } = await store.querySpans({ rolloutId: id, attemptId: rollout.latestAttempt.attemptId });
    const view = spansToMessages(spans);
    outcome.reward = view.finalReward;
    outcome.feedback = view.feedback;
    if (withMessages) outcome.conversations = view.conversations.map((c) => c.messages);
    return outcome;
  };

  /** Waits for `ids` (one chunk) until they finish or `deadline`; returns those that finished. */
  const waitChunk = async (ids: string[], deadline: number, signal?: AbortSignal): Promise<Map<string, Rollout>> => {
    const done = new Map<string, Rollout>();
    while (done.size < ids.length) {
      if (signal?.aborted) throw new AglError("aborted", "the run was aborted");
      const left = deadline - Date.now();
      if (left <= 0) break;
      const { rollouts } = await store.waitForRollouts(
        { rolloutIds: ids.filter((id) => !done.has(id)), timeoutSeconds: Math.min(30, left / 1000) },
        signal ? { signal } : {},
      );
      for (const r of rollouts) done.set(r.rolloutId, r);
    }
    return done;
  };

  return {
    async evaluate(request, signal) {
      if (request.tasks.length === 0) return [];
      const rollouts = await enqueue(request);
      const deadline = Date.now() + timeoutMs;
      const outcomes: RolloutOutcome[] = new Array(rollouts.length);
      const limit = createLimiter(options.readConcurrency ?? 16);
      const reads: Promise<void>[] = [];
      const late: string[] = [];
      let finished = 0;
      let failure: { error: unknown } | undefined;
      // The store re-reads every listed rollout whenever one finishes, so waits cover short chunks; each chunk's
      // spans are read while the next chunk still runs.
      for (let at = 0; at < rollouts.length; at += waitChunkSize) {
        const chunk = rollouts.slice(at, at + waitChunkSize);
        const done = await waitChunk(
          chunk.map((r) => r.rolloutId),
          deadline,
          signal,
        );
        finished += done.size;
        options.onProgress?.(request.key, finished, rollouts.length);
        chunk.forEach((rollout, offset) => {
          const i = at + offset;
          const task = request.tasks[i] as { index: number; input: JsonValue };
          const input = rollout.input ? toJson(ValueSchema, rollout.input) : task.input;
          const result = done.get(rollout.rolloutId);
          if (!result) late.push(rollout.rolloutId);
          // Handled at once: a failed read must not go unhandled while later chunks are still being waited for.
          const reading = limit(async () => {
            outcomes[i] = await read(result, rollout.rolloutId, task.index, input, request.withMessages);
          });
          reads.push(
            reading.catch((error: unknown) => {
              failure ??= { error };
            }),
          );
        });
      }
      if (late.length > 0) options.onLate?.(request.key, late.length, timeoutMs / 1000);
      await Promise.all([
        ...reads,
        ...late.map((rolloutId) => store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED }).catch(() => undefined)),
      ]);
      if (failure) throw failure.error;
      return outcomes;
    },
  };
}
