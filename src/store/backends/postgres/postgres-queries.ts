import type { PageResult, PageSpec, TableName } from "../../backend.js";
import { type Condition, Params, type SqlDialect, sqlFilters } from "../sql/sql-filters.js";
import { orderClause } from "../sql/sql-order.js";
import { sqlAggregates } from "../sql/sql-aggregates.js";

/** Filters, sort and pagination SQL of the PostgreSQL backend (`$n` parameters). */

const postgres: SqlDialect = {
  placeholder: (n) => `$${n}`,
  inList: (column, values, p) => `${column} = ANY(${p.add(values)}::${typeof values[0] === "number" ? "integer" : "text"}[])`,
  contains: (column, value, p) => `strpos(${column}, ${p.add(value)}) > 0`,
  truncate: (expr) => `floor(${expr})::integer`,
  number: (expr) => `(${expr})::float8`,
};

const filters = sqlFilters(postgres);
export const { rolloutWhere, attemptWhere, spanWhere, workerWhere, resourcesWhere, resourceVersionsWhere } = filters;

/** The aggregate statements over the tables of `schema`. */
export const aggregatesOf = (schema: string) => sqlAggregates(postgres, filters, (table) => `${schema}.${table}`);

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
    const p = new Params(postgres);
    const condition = where(p);
    const whereSql = condition ? ` WHERE ${condition}` : "";
    const limit = p.add(page.limit < 0 ? null : page.limit);
    const sql =
      `SELECT data FROM ${schema}.${table}${whereSql} ORDER BY ${orderClause(table, page)} ` + `LIMIT ${limit} OFFSET ${p.add(offset)}`;
    items = (await run(sql, p.values)).map((row) => decode(row.data as Uint8Array));
    if ((items.length > 0 || offset === 0) && (page.limit < 0 || items.length < page.limit)) {
      return { items, total: offset + items.length };
    }
  }
  const p = new Params(postgres);
  const condition = where(p);
  const whereSql = condition ? ` WHERE ${condition}` : "";
  const [row] = await run(`SELECT count(*)::integer AS n FROM ${schema}.${table}${whereSql}`, p.values);
  return { items, total: row?.n as number };
}
