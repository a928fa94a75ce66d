import type { ResourcesFilter, RolloutFilter, RolloutScope, SpanFilter, StringMatch, TimeRange, WorkerFilter } from "../../backend.js";

/**
 * The WHERE clauses of the SQL backends, built once for both dialects. Values are always parameters; only fixed column
 * names reach the SQL text, so the text depends on the query's shape alone and can be a prepared statement.
 */

/** The parameters of one statement, in the order their placeholders appear in its text. */
export class Params {
  readonly values: unknown[] = [];
  constructor(private readonly dialect: SqlDialect) {}
  /** Adds a value and returns its placeholder. */
  add(value: unknown): string {
    this.values.push(value);
    return this.dialect.placeholder(this.values.length);
  }
}

/** A condition that adds its parameters as it is rendered; "" means true. */
export type Condition = (p: Params) => string;

/** What differs between SQLite and PostgreSQL in a filter. */
export interface SqlDialect {
  /** The placeholder of the n-th parameter (1-based). */
  placeholder(n: number): string;
  /** `column` is one of `values`, bound as one parameter so the text does not depend on the list's length. */
  inList(column: string, values: readonly number[] | readonly string[], p: Params): string;
  /** `column` contains `value`: case-sensitive and literal (`LIKE` would give `%` and `_` meaning). */
  contains(column: string, value: string, p: Params): string;
  /** The integer part of a non-negative number. */
  truncate(expr: string): string;
  /** An aggregate (count, sum) as a value the driver returns as a JS number. */
  number(expr: string): string;
}

/** The filters of every table for one dialect. */
export interface SqlFilters {
  rolloutWhere(filter: RolloutFilter): Condition;
  /** Every restriction of the scope (AND); columns of the rollouts table, unqualified. */
  scopeWhere(scope: RolloutScope | undefined): Condition;
  attemptWhere(rolloutId: string): Condition;
  spanWhere(filter: SpanFilter): Condition;
  workerWhere(filter: WorkerFilter): Condition;
  resourcesWhere(filter: ResourcesFilter): Condition;
  resourceVersionsWhere(resourcesId: string): Condition;
}

/** Joins conditions with OR (`any`) or AND; no conditions match everything. */
function combine(conditions: Condition[], any: boolean): Condition {
  if (conditions.length === 0) return () => "";
  if (conditions.length === 1) return conditions[0]!;
  return (p) => conditions.map((c) => `(${c(p)})`).join(any ? " OR " : " AND ");
}

/** Both of two conditions (either may be "true"). */
function both(a: Condition, b: Condition): Condition {
  return (p) => {
    const left = a(p);
    const right = b(p);
    if (!left) return right;
    if (!right) return left;
    return `(${left}) AND (${right})`;
  };
}

const equals =
  (column: string, value: unknown): Condition =>
  (p) =>
    `${column} = ${p.add(value)}`;

export function sqlFilters(dialect: SqlDialect): SqlFilters {
  const inList =
    (column: string, values: readonly number[] | readonly string[]): Condition =>
    (p) =>
      dialect.inList(column, values, p);
  const contains =
    (column: string, value: string): Condition =>
    (p) =>
      dialect.contains(column, value, p);
  /** A StringMatch's members are separate conditions (like the request fields `x` and `x_contains` they come from). */
  const stringMatch = (column: string, match: StringMatch | undefined, out: Condition[]) => {
    if (match?.exact !== undefined) out.push(equals(column, match.exact));
    if (match?.contains !== undefined) out.push(contains(column, match.contains));
  };
  /** Unset times (NULL) fail every comparison, so they are outside any range with a bound. */
  const range = (column: string, r: TimeRange | undefined, out: Condition[]) => {
    const { from, to } = r ?? {};
    if (from !== undefined) out.push((p) => `${column} >= ${p.add(from)}`);
    if (to !== undefined) out.push((p) => `${column} < ${p.add(to)}`);
  };
  const scopeWhere = (scope: RolloutScope | undefined): Condition => {
    const conditions: Condition[] = [];
    if (scope?.statusIn?.length) conditions.push(inList("status", scope.statusIn));
    if (scope?.modeIn?.length) conditions.push(inList("mode", scope.modeIn));
    if (scope?.resourcesIdIn?.length) conditions.push(inList("resources_id", scope.resourcesIdIn));
    if (scope?.resourcesVersion !== undefined) conditions.push(equals("resources_version", scope.resourcesVersion));
    range("start_time", scope?.startTime, conditions);
    range("end_time", scope?.endTime, conditions);
    return combine(conditions, false);
  };
  return {
    rolloutWhere(filter) {
      const conditions: Condition[] = [];
      if (filter.statusIn?.length) conditions.push(inList("status", filter.statusIn));
      if (filter.rolloutIdIn?.length) conditions.push(inList("rollout_id", filter.rolloutIdIn));
      if (filter.rolloutIdContains !== undefined) conditions.push(contains("rollout_id", filter.rolloutIdContains));
      if (filter.groupId !== undefined) conditions.push(equals("group_id", filter.groupId));
      return both(combine(conditions, filter.any), scopeWhere(filter.scope));
    },
    scopeWhere,
    attemptWhere: (rolloutId) => equals("rollout_id", rolloutId),
    spanWhere(filter) {
      // Rollout, attempt and position always restrict; the string matches combine by `any`.
      const fixed: Condition[] = [equals("rollout_id", filter.rolloutId)];
      if (filter.attemptId !== undefined) fixed.push(equals("attempt_id", filter.attemptId));
      const after = filter.afterSequenceId;
      if (after !== undefined) fixed.push((p) => `sequence_id > ${p.add(after)}`);
      const conditions: Condition[] = [];
      stringMatch("trace_id", filter.traceId, conditions);
      stringMatch("span_id", filter.spanId, conditions);
      stringMatch("parent_id", filter.parentId, conditions);
      stringMatch("name", filter.name, conditions);
      return both(combine(fixed, false), combine(conditions, filter.any));
    },
    workerWhere(filter) {
      const conditions: Condition[] = [];
      if (filter.statusIn?.length) conditions.push(inList("status", filter.statusIn));
      if (filter.workerIdContains !== undefined) conditions.push(contains("worker_id", filter.workerIdContains));
      return combine(conditions, filter.any);
    },
    resourceVersionsWhere: (resourcesId) => equals("resources_id", resourcesId),
    resourcesWhere(filter) {
      const conditions: Condition[] = [];
      if (filter.resourcesId !== undefined) conditions.push(equals("resources_id", filter.resourcesId));
      if (filter.resourcesIdContains !== undefined) conditions.push(contains("resources_id", filter.resourcesIdContains));
      return combine(conditions, false);
    },
  };
}
