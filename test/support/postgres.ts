/**
 * PostgreSQL for tests: the server of the global setup (or AGL_TEST_POSTGRES_URL) and schemas of this run
 * (`t_<run>_<n>`, dropped by the global teardown at the latest).
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";

/** The test server's URL; throws (failing the test, never skipping it) when there is none. */
export function postgresUrl(): string {
  const url = inject("postgresUrl");
  if (!url) {
    throw new Error(
      `no PostgreSQL server for the tests: ${inject("postgresError") || "AGL_TEST_POSTGRES_URL is empty"}. ` +
        "Run the suite with `make test`, or start one with `scripts/postgres.sh start` and set AGL_TEST_POSTGRES_URL.",
    );
  }
  return url;
}

let admin: pg.Pool | undefined;
const adminPool = () => (admin ??= new pg.Pool({ connectionString: postgresUrl(), max: 2, allowExitOnIdle: true }));

const isTestSchema = (schema: string) => /^t_[0-9a-f]{6}_[0-9a-f]{8}$/.test(schema) && schema.startsWith(`t_${inject("postgresRun")}_`);

/** A schema name no other test uses; the backend creates the schema on start. */
export const freshSchema = (): string => `t_${inject("postgresRun")}_${randomBytes(4).toString("hex")}`;

/** Drops a test schema with everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  if (!isTestSchema(schema)) throw new Error(`not a schema of this test run: ${schema}`);
  await adminPool().query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
}

/** Emptied schemas of this worker, ready for the next test: emptying one is several times faster than creating one. */
const spare: string[] = [];
let tables: string[] | undefined;

/** A schema for one test: an emptied one of an earlier test, or a fresh one. Give it back with `releaseSchema`. */
export const borrowSchema = (): string => spare.pop() ?? freshSchema();

/** Empties a borrowed schema for the next test (or drops it, if that fails). */
export async function releaseSchema(schema: string): Promise<void> {
  if (!isTestSchema(schema)) throw new Error(`not a schema of this test run: ${schema}`);
  try {
    tables ??= (
      await adminQuery<{ name: string }>(
        "SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 AND tablename <> 'schema_version' ORDER BY 1",
        [schema],
      )
    ).map((row) => row.name);
    if (tables.length === 0) throw new Error("no tables");
    await adminPool().query(tables.map((table) => `DELETE FROM ${schema}.${table};`).join(" "));
    spare.push(schema);
  } catch {
    tables = undefined;
    await dropSchema(schema);
  }
}

/** Runs one statement on the test server (for assertions on stored rows). */
export async function adminQuery<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  return (await adminPool().query<R>(text, values)).rows;
}
