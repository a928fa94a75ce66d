import type { JsonObject } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import type { Page, RolloutConfig } from "../gen/agl/v1/types_pb.js";
import { AttemptStatus, SortOrder } from "../gen/agl/v1/types_pb.js";
import { type PageSpec, sortableFields, type TableName } from "./backend.js";
import { invalidArgument } from "./errors.js";

/** Bounds on request sizes; each has a default in `defaultLimits`. */
export interface StoreLimits {
  rolloutsPerEnqueue: number;
  spansPerBatch: number;
  dequeueLimit: number;
  waitSeconds: number;
  pageLimit: number;
  maxAttempts: number;
  idLength: number;
}

export const defaultLimits: StoreLimits = {
  rolloutsPerEnqueue: 10_000,
  spansPerBatch: 10_000,
  dequeueLimit: 1_000,
  waitSeconds: 3_600,
  pageLimit: 100_000,
  maxAttempts: 1_000,
  idLength: 256,
};

/** A known member of a protobuf enum (numeric TS enums map numbers back to names). */
export function checkEnum(value: number, names: Record<number, string>, field: string, allowZero = false): void {
  if (!Number.isInteger(value) || names[value] === undefined || (value === 0 && !allowZero)) {
    const allowed = Object.entries(names)
      .filter(([k]) => Number.isInteger(Number(k)) && (allowZero || Number(k) !== 0))
      .map(([, name]) => name);
    throw invalidArgument(`${field}: invalid value ${value}; expected one of ${allowed.join(", ")}`);
  }
}

/** A required id: non-empty and of sane length. */
export function checkId(value: string, field: string, limits: StoreLimits): void {
  if (!value) throw invalidArgument(`${field} is required`);
  if (value.length > limits.idLength) throw invalidArgument(`${field} is longer than ${limits.idLength} characters`);
}

export function checkCount(count: number, max: number, what: string): void {
  if (count > max) throw invalidArgument(`too many ${what}: ${count} (at most ${max} per call)`);
}

/** A wait in seconds: finite, not negative, at most the limit. */
export function checkSeconds(value: number | undefined, field: string, limits: StoreLimits): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value > limits.waitSeconds) {
    throw invalidArgument(`${field} must be a finite number of seconds up to ${limits.waitSeconds}, got ${value}`);
  }
}

const retryable = new Set([AttemptStatus.FAILED, AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE]);

export function checkConfig(config: RolloutConfig | undefined, limits: StoreLimits): void {
  if (!config) return;
  for (const field of ["timeoutSeconds", "unresponsiveSeconds"] as const) {
    const value = config[field];
    if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
      throw invalidArgument(`config.${field} must be a positive number of seconds, got ${value}`);
    }
  }
  if (config.maxAttempts > limits.maxAttempts) {
    throw invalidArgument(`config.max_attempts must be at most ${limits.maxAttempts}, got ${config.maxAttempts}`);
  }
  for (const status of config.retryCondition) {
    if (!retryable.has(status)) {
      throw invalidArgument(
        `config.retry_condition: ${AttemptStatus[status] ?? status} is not retryable; use FAILED, TIMEOUT or UNRESPONSIVE`,
      );
    }
  }
}

/** Validates a page request against a table's sortable fields and normalises it. */
export function toPageSpec(page: Page | undefined, table: TableName, limits: StoreLimits): PageSpec {
  const limit = page?.limit ?? -1;
  if (!Number.isInteger(limit) || limit < -1 || limit > limits.pageLimit) {
    throw invalidArgument(`page.limit must be -1 (all) or between 0 and ${limits.pageLimit}, got ${limit}`);
  }
  const sortBy = page?.sortBy || undefined;
  const allowed: readonly string[] = sortableFields[table];
  if (sortBy !== undefined && !allowed.includes(sortBy)) {
    throw invalidArgument(`page.sort_by: cannot sort ${table} by "${sortBy}"; sortable fields: ${allowed.join(", ")}`);
  }
  checkEnum(page?.sortOrder ?? 0, SortOrder, "page.sort_order", true);
  return { sortBy, descending: page?.sortOrder === SortOrder.DESC, limit, offset: page?.offset ?? 0 };
}

/**
 * Deepest nesting of a JSON value (`google.protobuf.Value` or `Struct`) the store accepts. Binary protobuf readers
 * (protobuf-es, Python's protobuf) refuse messages nested more than 100 deep, and each JSON level costs two: a value
 * stored deeper (say, sent as JSON over Connect) would make every answer carrying it undecodable for gRPC clients.
 */
export const maxJsonDepth = 32;

/**
 * Visits `root` and everything nested in it, depth first; `children` checks one node and names the nodes under it.
 * Deeper than {@link maxJsonDepth} is INVALID_ARGUMENT.
 */
function walkJson<T>(root: T, field: string, children: (node: T, path: string) => Array<[T, string]>): void {
  const stack: Array<[T, string, number]> = [[root, field, 0]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, path, depth] = next;
    if (depth > maxJsonDepth) throw invalidArgument(`${field}: nested deeper than ${maxJsonDepth} levels`);
    for (const [child, childPath] of children(node, path)) stack.push([child, childPath, depth + 1]);
  }
}

/**
 * A `google.protobuf.Value` that JSON can carry: a kind set at every level and only finite numbers. Anything else
 * would be stored but could never be read back over Connect JSON (or by the Python client's JSON conversions).
 */
export function checkValue(value: Value | undefined, field: string): void {
  if (value === undefined) return;
  walkJson(value, field, (v, path): Array<[Value, string]> => {
    const kind = v.kind;
    switch (kind.case) {
      case undefined:
        throw invalidArgument(`${path}: a google.protobuf.Value needs one of null, number, string, bool, struct or list`);
      case "numberValue":
        if (!Number.isFinite(kind.value)) throw invalidArgument(`${path}: ${kind.value} is not a JSON number`);
        return [];
      case "structValue":
        return Object.entries(kind.value.fields).map(([key, item]) => [item, `${path}.${key}`]);
      case "listValue":
        return kind.value.values.map((item, i) => [item, `${path}[${i}]`]);
      default:
        return [];
    }
  });
}

/** A `google.protobuf.Struct` (a JSON object in protobuf-es) that JSON can carry: only finite numbers. */
export function checkStruct(value: JsonObject | undefined, field: string): void {
  if (value === undefined) return;
  walkJson<unknown>(value, field, (v, path) => {
    if (typeof v === "number" && !Number.isFinite(v)) throw invalidArgument(`${path}: ${v} is not a JSON number`);
    if (Array.isArray(v)) return v.map((item, i) => [item, `${path}[${i}]`]);
    if (v !== null && typeof v === "object") return Object.entries(v).map(([key, item]) => [item, `${path}.${key}`]);
    return [];
  });
}
