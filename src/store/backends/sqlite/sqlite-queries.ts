import type Database from "better-sqlite3";
import type { PageResult, PageSpec, TableName } from "../../backend.js";
import { type Condition, Params, type SqlDialect, sqlFilters } from "../sql/sql-filters.js";
import { orderClause } from "../sql/sql-order.js";
import { sqlAggregates } from "../sql/sql-aggregates.js";

/** SQL for the queries of the SQLite backend: filters, order and pagination (`?` parameters). */

const sqlite: SqlDialect = {
  placeholder: () => "?",
  inList: (column, values, p) => `${column} IN (SELECT value FROM json_each(${p.add(JSON.stringify(values))}))`,
  contains: (column, value, p) => `instr(${column}, ${p.add(value)}) > 0`,
  truncate: (expr) => `CAST(${expr} AS INTEGER)`,
  number: (expr) => expr,
};

const filters = sqlFilters(sqlite);
export const { rolloutWhere, attemptWhere, spanWhere, workerWhere, resourcesWhere, resourceVersionsWhere } = filters;
export const aggregates = sqlAggregates(sqlite, filters, (table) => table);

/** Prepared statements by SQL text, each prepared once (query shapes are few: filters × sort keys × directions). */
export class StatementCache {
  private readonly statements = new Map<string, Database.Statement>();
  constructor(private readonly db: Database.Database) {}

  /** A statement returning each row as an object. */
  rows(sql: string): Database.Statement {
    let statement = this.statements.get(`rows:${sql}`);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(`rows:${sql}`, statement);
    }
    return statement;
  }

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
  const params = new Params(sqlite);
  const condition = where(params);
  const whereSql = condition ? ` WHERE ${condition}` : "";
  const offset = Math.max(0, page.offset);
  let items: T[] = [];
  if (page.limit !== 0) {
    const sql = `SELECT data FROM ${table}${whereSql} ORDER BY ${orderClause(table, page)} LIMIT ? OFFSET ?`;
    const rows = cache.pluck(sql).all(...params.values, page.limit < 0 ? -1 : page.limit, offset) as Uint8Array[];
    items = rows.map(decode);
    if ((items.length > 0 || offset === 0) && (page.limit < 0 || items.length < page.limit)) {
      return { items, total: offset + items.length };
    }
  }
  const total = cache.pluck(`SELECT count(*) FROM ${table}${whereSql}`).get(...params.values) as number;
  return { items, total };
}
