import type Database from "better-sqlite3";

/**
 * Rewrites of a row that set only the columns whose values changed, and `data`. SQLite rewrites the entry of every
 * index on a column the statement sets, changed or not: an upsert of the whole row costs ~60 µs against ~30 µs for
 * the few columns a status change touches (a rollout and its attempt, WAL file, measured). A rollout is rewritten
 * three or four times in its life, each time changing its status and little else.
 */
export class ColumnUpdates {
  /** By the bit mask of the columns set. */
  private readonly statements = new Map<number, Database.Statement>();

  /**
   * @param keys the columns that find the row (`WHERE`), in the order `update` takes their values
   * @param columns the other columns besides `data`: the SQL name, and the row object's property holding the value
   */
  constructor(
    private readonly db: Database.Database,
    private readonly table: string,
    private readonly keys: readonly string[],
    private readonly columns: ReadonlyArray<readonly [column: string, property: string]>,
  ) {
    if (columns.length > 30) throw new Error(`sqlite store: too many columns in ${table} for a bit mask`);
  }

  /** The row's column values, in this table's order: what the next `update` of the row compares against. */
  valuesOf(row: Readonly<Record<string, unknown>>): unknown[] {
    return this.columns.map(([, property]) => row[property]);
  }

  /**
   * Sets `data` and the columns whose values differ from `stored` (the values the row holds, as `valuesOf` gave them)
   * on the row with these keys. False when no row has them: the caller then writes the whole row.
   */
  update(stored: readonly unknown[], values: readonly unknown[], data: Uint8Array, keys: readonly unknown[]): boolean {
    let mask = 0;
    const args: unknown[] = [];
    for (let i = 0; i < values.length; i++) {
      if (values[i] === stored[i]) continue;
      mask |= 1 << i;
      args.push(values[i]);
    }
    args.push(data, ...keys);
    return this.statement(mask).run(...args).changes === 1;
  }

  private statement(mask: number): Database.Statement {
    let statement = this.statements.get(mask);
    if (!statement) {
      const set = this.columns.filter((_, i) => mask & (1 << i)).map(([column]) => `${column} = ?`);
      set.push("data = ?");
      const where = this.keys.map((column) => `${column} = ?`).join(" AND ");
      statement = this.db.prepare(`UPDATE ${this.table} SET ${set.join(", ")} WHERE ${where}`);
      this.statements.set(mask, statement);
    }
    return statement;
  }
}
