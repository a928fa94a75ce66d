import { toBinary } from "@bufbuild/protobuf";
import {
  type Attempt,
  AttemptSchema,
  type ResourcesUpdate,
  ResourcesUpdateSchema,
  type Rollout,
  RolloutSchema,
} from "../gen/agl/v1/types_pb.js";
import { time } from "./stored-messages.js";

/** Rows of the PostgreSQL backend: messages to column values and back, and prepared statement names. */


export const bytes = (data: Uint8Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength);
export const spanKey = (rolloutId: string, attemptId: string, spanId: string) => `${rolloutId}\0${attemptId}\0${spanId}`;
export const versionKey = (resourcesId: string, version: number) => `${resourcesId}\0${version}`;

/** Names of prepared statements by SQL text, shared by every connection (each prepares a statement on first use). */
const statementNames = new Map<string, string>();
export function statementName(text: string): string {
  let name = statementNames.get(text);
  if (!name) {
    name = `agl_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

export function rolloutRow(rollout: Rollout) {
  // Stored without latestAttempt: the core attaches it on reads.
  const data = toBinary(RolloutSchema, rollout.latestAttempt ? { ...rollout, latestAttempt: undefined } : rollout);
  return {
    rolloutId: rollout.rolloutId,
    status: rollout.status,
    startTime: rollout.startTime,
    endTime: time(rollout.endTime),
    mode: rollout.mode,
    resourcesId: rollout.resourcesId,
    groupId: rollout.groupId,
    data: bytes(data),
  };
}

export function attemptRow(attempt: Attempt): unknown[] {
  return [
    attempt.rolloutId,
    attempt.attemptId,
    attempt.sequenceId,
    attempt.startTime,
    time(attempt.endTime),
    attempt.status,
    attempt.workerId,
    time(attempt.lastHeartbeatTime),
    bytes(toBinary(AttemptSchema, attempt)),
  ];
}

export function resourcesRow(update: ResourcesUpdate): [string, number, number, number, Buffer] {
  return [update.resourcesId, update.createTime, update.updateTime, update.version, bytes(toBinary(ResourcesUpdateSchema, update))];
}
