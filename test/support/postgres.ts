/**
 * PostgreSQL for tests: the server started by the global setup (or given by AGL_TEST_POSTGRES_URL), a fresh schema
 * per use, dropped afterwards.
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

/** A schema name no other test uses; the backend creates the schema on start. */
export const freshSchema = (): string => `t_${randomBytes(6).toString("hex")}`;

/** Drops a test schema with everything in it. */
export async function dropSchema(schema: string): Promise<void> {
  if (!/^t_[0-9a-f]{12}$/.test(schema)) throw new Error(`not a test schema: ${schema}`);
  await adminPool().query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
}

/** Runs one statement on the test server (for assertions on stored rows). */
export async function adminQuery<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  return (await adminPool().query<R>(text, values)).rows;
}
