import { orderClause } from "./sql-order.js";
import type Database from "better-sqlite3";
import {
  type PageResult,
  type PageSpec,
  type ResourcesFilter,
  type RolloutFilter,
  type SpanFilter,
  type StringMatch,
  type WorkerFilter,
  sortableFields,
} from "./backend.js";

/** SQL for the queries of the SQLite backend: filters, order and pagination. */

export type TableName = keyof typeof sortableFields;

/** A SQL boolean expression with its positional parameters; `sql` empty means "true". */
export interface Condition {
  sql: string;
  params: unknown[];
}

const everything: Condition = { sql: "", params: [] };

/** Joins conditions with OR (`any`) or AND; no conditions match everything. */
export function combine(conditions: Condition[], any: boolean): Condition {
  if (conditions.length === 0) return everything;
  if (conditions.length === 1) return conditions[0]!;
  return {
    sql: conditions.map((c) => `(${c.sql})`).join(any ? " OR " : " AND "),
    params: conditions.flatMap((c) => c.params),
  };
}

/** Both of two conditions (either may be "true"). */
function both(a: Condition, b: Condition): Condition {
  if (!a.sql) return b;
  if (!b.sql) return a;
  return { sql: `(${a.sql}) AND (${b.sql})`, params: [...a.params, ...b.params] };
}

/** Membership in a list, bound as one JSON array so the statement text does not depend on the list's length. */
const inList = (column: string, values: readonly unknown[]): Condition => ({
  sql: `${column} IN (SELECT value FROM json_each(?))`,
  params: [JSON.stringify(values)],
});

/** Case-sensitive substring (`LIKE` would be case-insensitive and give `%` and `_` meaning). */
const contains = (column: string, value: string): Condition => ({ sql: `instr(${column}, ?) > 0`, params: [value] });

const equals = (column: string, value: unknown): Condition => ({ sql: `${column} = ?`, params: [value] });

/** A StringMatch's members are separate conditions (like the request fields `x` and `x_contains` they come from). */
function stringMatch(column: string, match: StringMatch | undefined, out: Condition[]): void {
  if (match?.exact !== undefined) out.push(equals(column, match.exact));
  if (match?.contains !== undefined) out.push(contains(column, match.contains));
}

export function rolloutWhere(filter: RolloutFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.statusIn?.length) conditions.push(inList("status", filter.statusIn));
  if (filter.rolloutIdIn?.length) conditions.push(inList("rollout_id", filter.rolloutIdIn));
  if (filter.rolloutIdContains !== undefined) conditions.push(contains("rollout_id", filter.rolloutIdContains));
  if (filter.groupId !== undefined) conditions.push(equals("group_id", filter.groupId));
  return combine(conditions, filter.any);
}

export function spanWhere(filter: SpanFilter): Condition {
  const fixed: Condition[] = [equals("rollout_id", filter.rolloutId)];
  if (filter.attemptId !== undefined) fixed.push(equals("attempt_id", filter.attemptId));
  if (filter.afterSequenceId !== undefined) fixed.push({ sql: "sequence_id > ?", params: [filter.afterSequenceId] });
  const conditions: Condition[] = [];
  stringMatch("trace_id", filter.traceId, conditions);
  stringMatch("span_id", filter.spanId, conditions);
  stringMatch("parent_id", filter.parentId, conditions);
  stringMatch("name", filter.name, conditions);
  return both(combine(fixed, false), combine(conditions, filter.any));
}

export function workerWhere(filter: WorkerFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.statusIn?.length) conditions.push(inList("status", filter.statusIn));
  if (filter.workerIdContains !== undefined) conditions.push(contains("worker_id", filter.workerIdContains));
  return combine(conditions, filter.any);
}

export function resourcesWhere(filter: ResourcesFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.resourcesId !== undefined) conditions.push(equals("resources_id", filter.resourcesId));
  if (filter.resourcesIdContains !== undefined) conditions.push(contains("resources_id", filter.resourcesIdContains));
  return combine(conditions, false);
}

/** Prepared statements by SQL text, each prepared once (query shapes are few: filters × sort keys × directions). */
export class StatementCache {
  private readonly statements = new Map<string, Database.Statement>();
  constructor(private readonly db: Database.Database) {}

  /** A statement returning the first column of each row. */
  pluck(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql).pluck();
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/**
 * One page of `table`'s rows matching `where`, decoded from the `data` column, and the number of matches. The count
 * query is skipped when the page itself shows the total (a non-empty, or first, page shorter than the limit).
 */
export function queryPage<T>(
  cache: StatementCache,
  table: TableName,
  where: Condition,
  page: PageSpec,
  decode: (data: Uint8Array) => T,
): PageResult<T> {
  const whereSql = where.sql ? ` WHERE ${where.sql}` : "";
  const offset = Math.max(0, page.offset);
  let items: T[] = [];
  if (page.limit !== 0) {
    const sql = `SELECT data FROM ${table}${whereSql} ORDER BY ${orderClause(table, page)} LIMIT ? OFFSET ?`;
    const rows = cache.pluck(sql).all(...where.params, page.limit < 0 ? -1 : page.limit, offset) as Uint8Array[];
    items = rows.map(decode);
    if ((items.length > 0 || offset === 0) && (page.limit < 0 || items.length < page.limit)) {
      return { items, total: offset + items.length };
    }
  }
  const total = cache.pluck(`SELECT count(*) FROM ${table}${whereSql}`).get(...where.params) as number;
  return { items, total };
}
