import { RolloutMode, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import type { RolloutScope, TimeRange } from "./backend.js";
import { invalidArgument } from "./errors.js";
import { checkCount, checkEnum, checkId, type StoreLimits } from "./validate.js";

/** The restrictions a request puts on rollouts, before validation (field names are the proto ones, for messages). */
export interface ScopeRequest {
  modeIn?: readonly RolloutMode[];
  resourcesIdIn?: readonly string[];
  statusIn?: readonly RolloutStatus[];
  resourcesVersion?: number;
  startTimeFrom?: number;
  startTimeTo?: number;
  endTimeFrom?: number;
  endTimeTo?: number;
}

/** Ids and enum values one request may list in a filter. */
const maxListed = 1_000;

/** A time given in a request: epoch seconds, finite. */
export function checkTime(value: number | undefined, field: string): void {
  if (value !== undefined && !Number.isFinite(value))
    throw invalidArgument(`${field} must be a finite number of epoch seconds, got ${value}`);
}

/** [from, to) from two optional request fields; `to` must be after `from`. Undefined when both are absent. */
export function timeRange(from: number | undefined, to: number | undefined, field: string): TimeRange | undefined {
  checkTime(from, `${field}_from`);
  checkTime(to, `${field}_to`);
  if (from !== undefined && to !== undefined && !(to > from)) {
    throw invalidArgument(`${field}_to (${to}) must be greater than ${field}_from (${from}): the range is [from, to)`);
  }
  if (from === undefined && to === undefined) return undefined;
  return { from, to };
}

/** Validates a request's restrictions and returns them as a scope (absent or empty fields restrict nothing). */
export function rolloutScope(req: ScopeRequest, limits: StoreLimits): RolloutScope {
  const scope: RolloutScope = {};
  if (req.modeIn?.length) {
    checkCount(req.modeIn.length, maxListed, "modes in mode_in");
    for (const mode of req.modeIn) checkEnum(mode, RolloutMode, "mode_in", true);
    scope.modeIn = [...req.modeIn];
  }
  if (req.statusIn?.length) {
    checkCount(req.statusIn.length, maxListed, "statuses in status_in");
    for (const status of req.statusIn) checkEnum(status, RolloutStatus, "status_in");
    scope.statusIn = [...req.statusIn];
  }
  if (req.resourcesIdIn?.length) {
    checkCount(req.resourcesIdIn.length, maxListed, "ids in resources_id_in");
    for (const id of req.resourcesIdIn) checkId(id, "resources_id_in", limits);
    scope.resourcesIdIn = [...req.resourcesIdIn];
  }
  if (req.resourcesVersion) scope.resourcesVersion = req.resourcesVersion;
  const startTime = timeRange(req.startTimeFrom, req.startTimeTo, "start_time");
  if (startTime) scope.startTime = startTime;
  const endTime = timeRange(req.endTimeFrom, req.endTimeTo, "end_time");
  if (endTime) scope.endTime = endTime;
  return scope;
}
