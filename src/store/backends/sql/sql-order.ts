import { type PageSpec, sortableFields, type TableName } from "../../backend.js";

/** Default sort key and the columns that may be NULL (unset optional times, sorted as +infinity). */
const tableOrder: Record<TableName, { defaultKey: string; nullable: ReadonlySet<string> }> = {
  rollouts: { defaultKey: "seq", nullable: new Set(["end_time"]) },
  attempts: { defaultKey: "sequence_id", nullable: new Set(["end_time", "last_heartbeat_time"]) },
  spans: { defaultKey: "sequence_id", nullable: new Set(["start_time", "end_time"]) },
  workers: {
    defaultKey: "seq",
    nullable: new Set(["last_heartbeat_time", "last_dequeue_time", "last_busy_time", "last_idle_time"]),
  },
  resources: { defaultKey: "seq", nullable: new Set() },
  resource_versions: { defaultKey: "version", nullable: new Set() },
};

/**
 * ORDER BY for a page: the key in the page's direction, then insertion order (`seq`) ascending so ties keep insertion
 * order in both directions. NULLs are +infinity: last ascending, first descending. No `sortBy` means the table's
 * default key (insertion order for rollouts, workers and resources; `sequence_id` for attempts and spans).
 */
export function orderClause(table: TableName, page: PageSpec): string {
  const { defaultKey, nullable } = tableOrder[table];
  let key = defaultKey;
  if (page.sortBy) {
    // Column names equal proto field names; only whitelisted names ever reach the SQL text.
    if (!(sortableFields[table] as readonly string[]).includes(page.sortBy)) {
      throw new Error(`store: ${table} cannot be sorted by ${JSON.stringify(page.sortBy)}`);
    }
    key = page.sortBy;
  }
  const direction = page.descending ? "DESC" : "ASC";
  if (key === "seq") return `seq ${direction}`;
  const nulls = nullable.has(key) ? (page.descending ? " NULLS FIRST" : " NULLS LAST") : "";
  return `${key} ${direction}${nulls}, seq ASC`;
}
