import { fromBinary } from "@bufbuild/protobuf";
import {
  AttemptSchema,
  ResourcesUpdateSchema,
  RolloutSchema,
  SpanSchema,
  WorkerSchema,
} from "../gen/agl/v1/types_pb.js";

/** SQL backends keep each entity as its protobuf binary; these read it back. */
export const decodeRollout = (data: Uint8Array) => fromBinary(RolloutSchema, data);
export const decodeAttempt = (data: Uint8Array) => fromBinary(AttemptSchema, data);
export const decodeSpan = (data: Uint8Array) => fromBinary(SpanSchema, data);
export const decodeWorker = (data: Uint8Array) => fromBinary(WorkerSchema, data);
export const decodeResources = (data: Uint8Array) => fromBinary(ResourcesUpdateSchema, data);

/** Optional times: undefined is stored as NULL. */
export const time = (value: number | undefined) => value ?? null;
