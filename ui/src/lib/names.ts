import { AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus } from "../../../src/gen/agl/v1/types_pb.js";

/** Rollout statuses by their lowercase names, as URLs and test ids spell them, in lifecycle order. */
export const ROLLOUT_STATUSES = {
  queuing: RolloutStatus.QUEUING,
  preparing: RolloutStatus.PREPARING,
  running: RolloutStatus.RUNNING,
  requeuing: RolloutStatus.REQUEUING,
  succeeded: RolloutStatus.SUCCEEDED,
  failed: RolloutStatus.FAILED,
  cancelled: RolloutStatus.CANCELLED,
} as const;
export type RolloutStatusName = keyof typeof ROLLOUT_STATUSES;
export const ROLLOUT_STATUS_NAMES = Object.keys(ROLLOUT_STATUSES) as RolloutStatusName[];

/** Rollout modes by name; `none` is the unspecified mode. */
export const ROLLOUT_MODES = {
  train: RolloutMode.TRAIN,
  val: RolloutMode.VAL,
  test: RolloutMode.TEST,
  none: RolloutMode.UNSPECIFIED,
} as const;
export type RolloutModeName = keyof typeof ROLLOUT_MODES;
export const ROLLOUT_MODE_NAMES = Object.keys(ROLLOUT_MODES) as RolloutModeName[];

/** Lowercase name of a generated enum value (`RolloutStatus.SUCCEEDED` → `succeeded`); `unspecified` for 0. */
function enumName(table: Record<number, string>, value: number): string {
  return (table[value] ?? `unknown(${value})`).toLowerCase();
}

export const rolloutStatusName = (status: RolloutStatus) => enumName(RolloutStatus, status);
export const attemptStatusName = (status: AttemptStatus) => enumName(AttemptStatus, status);
export const workerStatusName = (status: WorkerStatus) => enumName(WorkerStatus, status);
export const rolloutModeName = (mode: RolloutMode): RolloutModeName =>
  mode === RolloutMode.UNSPECIFIED ? "none" : (enumName(RolloutMode, mode) as RolloutModeName);

export const isRolloutStatusName = (name: string): name is RolloutStatusName => Object.hasOwn(ROLLOUT_STATUSES, name);
export const isRolloutModeName = (name: string): name is RolloutModeName => Object.hasOwn(ROLLOUT_MODES, name);

/**
 * The status name of a `Statistics.rollouts_by_status` key (`ROLLOUT_STATUS_RUNNING` → `running`), or undefined for a
 * key this build does not know.
 */
export function statusNameOfStatisticsKey(key: string): RolloutStatusName | undefined {
  const name = key.replace(/^ROLLOUT_STATUS_/, "").toLowerCase();
  return isRolloutStatusName(name) ? name : undefined;
}

/** One colour per status and outcome, shared by badges and charts. */
export const STATUS_COLORS: Record<string, string> = {
  queuing: "#8c8c8c",
  preparing: "#b37feb",
  running: "#1677ff",
  requeuing: "#fa8c16",
  succeeded: "#52c41a",
  failed: "#f5222d",
  cancelled: "#595959",
  unresponsive: "#d4380d",
  timeout: "#ad4e00",
  idle: "#52c41a",
  busy: "#1677ff",
  unknown: "#8c8c8c",
};
