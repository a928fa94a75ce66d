import type Database from "better-sqlite3";

/** A column and the property of the row object (`rolloutRow`, `attemptRow`) holding its value. */
type Column = readonly [column: string, property: string];

/** A row as the backend binds it: its columns' values by property, and the message's bytes. */
type Row = Readonly<Record<string, unknown>> & { data: Uint8Array };

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
   * @param keys the columns that find the row (`WHERE`)
   * @param columns the other columns besides `data`
   * @param upsert the statement that writes the whole row, used when the stored columns are not known
   */
  constructor(
    private readonly db: Database.Database,
    private readonly table: string,
    private readonly keys: readonly Column[],
    private readonly columns: readonly Column[],
    private readonly upsert: Database.Statement,
  ) {
    if (columns.length > 30) throw new Error(`sqlite store: too many columns in ${table} for a bit mask`);
  }

  /** The row's column values, in this table's order: what the next `write` of the row compares against. */
  valuesOf(row: Row): unknown[] {
    return this.columns.map(([, property]) => row[property]);
  }

  /**
   * Writes `row` over the stored one: `data` and the columns whose values differ from `stored` (the values the row
   * holds, as `valuesOf` gave them), or the whole row when `stored` is unknown or no row has its keys. Returns the
   * row's column values.
   */
  write(row: Row, stored: readonly unknown[] | undefined): unknown[] {
    const values = this.valuesOf(row);
    if (!stored || !this.update(stored, values, row)) this.upsert.run(row);
    return values;
  }

  private update(stored: readonly unknown[], values: readonly unknown[], row: Row): boolean {
    let mask = 0;
    const args: unknown[] = [];
    for (let i = 0; i < values.length; i++) {
      if (values[i] === stored[i]) continue;
      mask |= 1 << i;
      args.push(values[i]);
    }
    args.push(row.data);
    for (const [, property] of this.keys) args.push(row[property]);
    return this.statement(mask).run(...args).changes === 1;
  }

  private statement(mask: number): Database.Statement {
    let statement = this.statements.get(mask);
    if (!statement) {
      const set = this.columns.filter((_, i) => mask & (1 << i)).map(([column]) => `${column} = ?`);
      set.push("data = ?");
      const where = this.keys.map(([column]) => `${column} = ?`).join(" AND ");
      statement = this.db.prepare(`UPDATE ${this.table} SET ${set.join(", ")} WHERE ${where}`);
      this.statements.set(mask, statement);
    }
    return statement;
  }
}
