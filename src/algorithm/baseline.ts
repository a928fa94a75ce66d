import { fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type ResourceSchema, type RolloutConfigSchema, RolloutMode, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { sleep } from "../core/retry.js";
import type { Algorithm, AlgorithmContext, Datasets } from "./algorithm.js";
import { finalRewardOf } from "./rollout-reward.js";

/** Options of {@link createBaseline}. */
export interface BaselineOptions {
  /** Passes over the datasets. Default 1. */
  epochs?: number;
  /** Rollouts waiting in the queue at most; the rest are enqueued as runners take work. Default: no limit. */
  maxQueued?: number;
  /** Resources to publish first (the rollouts run against them). Default: whatever the store has. */
  resources?: Record<string, MessageInitShape<typeof ResourceSchema>>;
  /** Retry and timeout policy of each rollout. */
  rolloutConfig?: MessageInitShape<typeof RolloutConfigSchema>;
  /** How long to wait for all rollouts of an epoch. Default: 1 hour. */
  timeoutSeconds?: number;
}

/** One rollout of a Baseline run. */
export interface BaselineRollout {
  rolloutId: string;
  input: JsonValue;
  mode: "train" | "val";
  status: string;
  reward: number | undefined;
  attempts: number;
}

/** What a Baseline run reports. */
export interface BaselineReport {
  rollouts: BaselineRollout[];
  /** Mean final reward over train and over val rollouts that reported one (undefined when none did). */
  meanReward: { train: number | undefined; val: number | undefined };
  /** Rollouts by final status (`succeeded`, `failed`, `cancelled`, or `unfinished` past the timeout). */
  statuses: Record<string, number>;
}

const mean = (xs: number[]) => (xs.length === 0 ? undefined : xs.reduce((a, b) => a + b, 0) / xs.length);
const statusName = (s: RolloutStatus) => RolloutStatus[s]?.toLowerCase() ?? String(s);

/**
 * The simplest algorithm: enqueue every task (train, then val), wait for the rollouts to finish, and report each
 * one's status and final reward. No training happens; it measures an agent as it is.
 */
export function createBaseline(options: BaselineOptions = {}): Algorithm<BaselineReport> {
  return {
    name: "baseline",
    async run({ store, logger }: AlgorithmContext, data: Datasets): Promise<BaselineReport> {
      const tasks = [
        ...(data.train ?? []).map((input) => ({ input, mode: "train" as const })),
        ...(data.val ?? []).map((input) => ({ input, mode: "val" as const })),
      ];
      if (tasks.length === 0) logger.warn("baseline: both datasets are empty; nothing to run");
      let resourcesId = "";
      if (options.resources) resourcesId = (await store.addResources({ resources: options.resources })).resourcesId;
      const rollouts: BaselineRollout[] = [];
      for (let epoch = 0; epoch < (options.epochs ?? 1); epoch++) {
        const ids: string[] = [];
        const pending = [...tasks];
        while (pending.length > 0) {
          let room = pending.length;
          if (options.maxQueued !== undefined) {
            const stats = await store.getStatistics({});
            room = Math.min(room, Math.max(0, options.maxQueued - stats.queueLength));
            if (room === 0) {
              await sleep(100);
              continue;
            }
          }
          const batch = pending.splice(0, room);
          const { rollouts: queued } = await store.enqueueRollouts({
            rollouts: batch.map((t) => ({
              input: fromJson(ValueSchema, t.input),
              mode: t.mode === "train" ? RolloutMode.TRAIN : RolloutMode.VAL,
              resourcesId,
              ...(options.rolloutConfig ? { config: options.rolloutConfig } : {}),
            })),
          });
          ids.push(...queued.map((r) => r.rolloutId));
        }
        const { rollouts: finished } = await store.waitForRollouts({ rolloutIds: ids, timeoutSeconds: options.timeoutSeconds ?? 3600 });
        const done = new Map(finished.map((r) => [r.rolloutId, r]));
        for (const [i, rolloutId] of ids.entries()) {
          const task = tasks[i] as (typeof tasks)[number];
          const rollout = done.get(rolloutId);
          const { attempts } = await store.queryAttempts({ rolloutId });
          const entry: BaselineRollout = {
            rolloutId,
            input: task.input,
            mode: task.mode,
            status: rollout ? statusName(rollout.status) : "unfinished",
            reward: rollout ? await finalRewardOf(store, rolloutId) : undefined,
            attempts: attempts.length,
          };
          logger.info(
            `baseline epoch ${epoch + 1}: ${rolloutId} (${entry.mode}) ${entry.status}, reward ${entry.reward ?? "none"}, ` +
              `${entry.attempts} attempt(s)`,
          );
          rollouts.push(entry);
        }
      }
      const rewards = (mode: "train" | "val") =>
        rollouts.filter((r) => r.mode === mode && r.reward !== undefined).map((r) => r.reward as number);
      const statuses: Record<string, number> = {};
      for (const r of rollouts) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      return { rollouts, meanReward: { train: mean(rewards("train")), val: mean(rewards("val")) }, statuses };
    },
  };
}
