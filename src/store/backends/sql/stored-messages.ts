import { encodeMessage } from "../../../encoding/generated-encoder.js";
import { decodeMessage } from "../../../encoding/generated-decoder.js";
import {
  AttemptSchema,
  ResourcesUpdateSchema,
  type Rollout,
  RolloutSchema,
  SpanSchema,
  WorkerSchema,
} from "../../../gen/agl/v1/types_pb.js";

/** SQL backends keep each entity as its protobuf binary (with a few columns to filter and sort on); these read it back. */
export const decodeRollout = (data: Uint8Array) => decodeMessage(RolloutSchema, data);
export const decodeAttempt = (data: Uint8Array) => decodeMessage(AttemptSchema, data);
export const decodeSpan = (data: Uint8Array) => decodeMessage(SpanSchema, data);
export const decodeWorker = (data: Uint8Array) => decodeMessage(WorkerSchema, data);
export const decodeResources = (data: Uint8Array) => decodeMessage(ResourcesUpdateSchema, data);

/** Optional times: undefined is stored as NULL. */
export const time = (value: number | undefined) => value ?? null;

/** A rollout's columns and binary. It is stored without `latestAttempt`: the core attaches that on reads. */
export function rolloutRow(rollout: Rollout) {
  const data = encodeMessage(RolloutSchema, rollout.latestAttempt ? { ...rollout, latestAttempt: undefined } : rollout);
  return {
    rolloutId: rollout.rolloutId,
    status: rollout.status,
    startTime: rollout.startTime,
    endTime: time(rollout.endTime),
    mode: rollout.mode,
    resourcesId: rollout.resourcesId,
    resourcesVersion: rollout.resourcesVersion,
    groupId: rollout.groupId,
    data,
  };
}
