import { orderClause } from "./sql-order.js";
import {
  sortableFields,
  type PageResult,
  type PageSpec,
  type ResourcesFilter,
  type RolloutFilter,
  type SpanFilter,
  type StringMatch,
  type WorkerFilter,
} from "./backend.js";

/**
 * Filter, sort and pagination SQL of the PostgreSQL backend, built per query shape. Values are always parameters
 * (`$n`); only whitelisted column names reach the SQL text, so the text depends on the shape alone and can be a
 * prepared statement.
 */

/** Positional parameters of one statement. */
export class Params {
  readonly values: unknown[] = [];
  /** Adds a value and returns its placeholder. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** A condition that adds its parameters when rendered; "" means true. */
type Condition = (p: Params) => string;

type TableName = keyof typeof sortableFields;


function combine(conditions: Condition[], any: boolean): Condition {
  if (conditions.length === 0) return () => "";
  if (conditions.length === 1) return conditions[0]!;
  return (p) => conditions.map((c) => `(${c(p)})`).join(any ? " OR " : " AND ");
}

function both(a: Condition, b: Condition): Condition {
  return (p) => {
    const left = a(p);
    const right = b(p);
    if (!left) return right;
    if (!right) return left;
    return `(${left}) AND (${right})`;
  };
}

/** Membership in a list bound as one array, so the statement text does not depend on the list's length. */
const inInts = (column: string, values: readonly number[]): Condition => (p) => `${column} = ANY(${p.add(values)}::integer[])`;
const inTexts = (column: string, values: readonly string[]): Condition => (p) => `${column} = ANY(${p.add(values)}::text[])`;

/** Case-sensitive literal substring (`LIKE` would give `%` and `_` meaning). */
const contains = (column: string, value: string): Condition => (p) => `strpos(${column}, ${p.add(value)}) > 0`;

const equals = (column: string, value: unknown): Condition => (p) => `${column} = ${p.add(value)}`;

function stringMatch(column: string, match: StringMatch | undefined, out: Condition[]): void {
  if (match?.exact !== undefined) out.push(equals(column, match.exact));
  if (match?.contains !== undefined) out.push(contains(column, match.contains));
}

export function rolloutWhere(filter: RolloutFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.statusIn?.length) conditions.push(inInts("status", filter.statusIn));
  if (filter.rolloutIdIn?.length) conditions.push(inTexts("rollout_id", filter.rolloutIdIn));
  if (filter.rolloutIdContains !== undefined) conditions.push(contains("rollout_id", filter.rolloutIdContains));
  if (filter.groupId !== undefined) conditions.push(equals("group_id", filter.groupId));
  return combine(conditions, filter.any);
}

export function spanWhere(filter: SpanFilter): Condition {
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
}

export function attemptWhere(rolloutId: string): Condition {
  return equals("rollout_id", rolloutId);
}

export function workerWhere(filter: WorkerFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.statusIn?.length) conditions.push(inInts("status", filter.statusIn));
  if (filter.workerIdContains !== undefined) conditions.push(contains("worker_id", filter.workerIdContains));
  return combine(conditions, filter.any);
}

export function resourcesWhere(filter: ResourcesFilter): Condition {
  const conditions: Condition[] = [];
  if (filter.resourcesId !== undefined) conditions.push(equals("resources_id", filter.resourcesId));
  if (filter.resourcesIdContains !== undefined) conditions.push(contains("resources_id", filter.resourcesIdContains));
  return combine(conditions, false);
}

/** Runs one statement and returns its rows; the backend supplies a runner that prepares statements by text. */
export type Run = (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>;

/**
 * One page of `table`'s rows matching `where`, decoded from `data`, and the number of matches. The count query is
 * skipped when the page itself shows the total (a non-empty, or first, page shorter than the limit).
 */
export async function queryPage<T>(
  run: Run,
  schema: string,
  table: TableName,
  where: Condition,
  page: PageSpec,
  decode: (data: Uint8Array) => T,
): Promise<PageResult<T>> {
  const offset = Math.max(0, page.offset);
  let items: T[] = [];
  if (page.limit !== 0) {
    const p = new Params();
    const condition = where(p);
    const whereSql = condition ? ` WHERE ${condition}` : "";
    const limit = p.add(page.limit < 0 ? null : page.limit);
    const sql =
      `SELECT data FROM ${schema}.${table}${whereSql} ORDER BY ${orderClause(table, page)} ` +
      `LIMIT ${limit} OFFSET ${p.add(offset)}`;
    items = (await run(sql, p.values)).map((row) => decode(row["data"] as Uint8Array));
    if ((items.length > 0 || offset === 0) && (page.limit < 0 || items.length < page.limit)) {
      return { items, total: offset + items.length };
    }
  }
  const p = new Params();
  const condition = where(p);
  const whereSql = condition ? ` WHERE ${condition}` : "";
  const [row] = await run(`SELECT count(*)::integer AS n FROM ${schema}.${table}${whereSql}`, p.values);
  return { items, total: row?.["n"] as number };
}
