import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { RolloutMode } from "../agent/agent.js";
import type { ResourcesData } from "../agent/resources.js";
import { type Rollout, RolloutMode as ProtoMode } from "../gen/agl/v1/types_pb.js";
import type { AttemptTask } from "./attempt-task.js";

const modes: Partial<Record<ProtoMode, RolloutMode>> = {
  [ProtoMode.TRAIN]: "train",
  [ProtoMode.VAL]: "val",
  [ProtoMode.TEST]: "test",
};

/** Settings a runner applies to every task. */
export interface TaskSettings {
  abortGraceMs: number;
  spanBatchSize: number;
  spanFlushMs: number;
  proxyApiKey?: string;
}

/** The task for a claimed rollout (with its new attempt as `latestAttempt`). */
export function buildTask(rollout: Rollout, resources: ResourcesData, settings: TaskSettings, nowMs = Date.now()): AttemptTask {
  const attempt = rollout.latestAttempt;
  if (!attempt) throw new Error(`rollout ${rollout.rolloutId} was claimed without an attempt`);
  const timeout = rollout.config?.timeoutSeconds;
  const task: AttemptTask = {
    rolloutId: rollout.rolloutId,
    attemptId: attempt.attemptId,
    attemptSequence: attempt.sequenceId,
    input: rollout.input ? toJson(ValueSchema, rollout.input) : null,
    mode: modes[rollout.mode],
    metadata: rollout.metadata ?? {},
    groupId: rollout.groupId,
    resources,
    ...settings,
  };
  if (timeout !== undefined && timeout > 0) task.deadlineMs = nowMs + timeout * 1000;
  return task;
}
