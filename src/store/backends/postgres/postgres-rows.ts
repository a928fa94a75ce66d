import { encodeMessage } from "../../../encoding/generated-encoder.js";
import { type Attempt, AttemptSchema, type ResourcesUpdate, ResourcesUpdateSchema } from "../../../gen/agl/v1/types_pb.js";
import { time } from "../sql/stored-messages.js";

/** Rows of the PostgreSQL backend: messages to column values, and prepared statement names. */

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
    encodeMessage(AttemptSchema, attempt),
  ];
}

export function resourcesRow(update: ResourcesUpdate): [string, number, number, number, Uint8Array] {
  return [update.resourcesId, update.createTime, update.updateTime, update.version, encodeMessage(ResourcesUpdateSchema, update)];
}
