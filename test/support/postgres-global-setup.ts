/**
 * vitest globalSetup: makes a real PostgreSQL server available to the suite. With AGL_TEST_POSTGRES_URL set (as
 * `make test` does), that server is used; otherwise `scripts/postgres.sh` installs and starts the project's private
 * server for this run (under a lease, so concurrent runs share it) and stops it afterwards. If it cannot start, the
 * PostgreSQL tests fail with the reason; the others still run. Afterwards the schemas this run created are dropped.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The server's URL, or "" when it could not be started. */
    postgresUrl: string;
    /** Why there is no server, when `postgresUrl` is "". */
    postgresError: string;
    /** Names this run's test schemas (`t_<run>_…`), so that concurrent runs on one server never touch each other's. */
    postgresRun: string;
  }
}

const script = fileURLToPath(new URL("../../scripts/postgres.sh", import.meta.url));

export default function setup(project: TestProject): () => Promise<void> {
  const run = randomBytes(3).toString("hex");
  project.provide("postgresRun", run);
  const env = { ...process.env, AGL_POSTGRES_LEASE: String(process.pid) };
  let url = process.env.AGL_TEST_POSTGRES_URL ?? "";
  let started = false;
  let error = "";
  if (!url) {
    try {
      url = execFileSync(script, ["start"], { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
      started = true;
    } catch (e) {
      error = `scripts/postgres.sh start failed: ${(e as { stderr?: string }).stderr || String(e)}`;
    }
  }
  project.provide("postgresUrl", url);
  project.provide("postgresError", error);
  return async () => {
    if (url) await dropRunSchemas(url, run).catch((e: unknown) => console.error("could not drop the test schemas:", e));
    if (started) execFileSync(script, ["stop"], { env, stdio: ["ignore", "ignore", "inherit"] });
  };
}

async function dropRunSchemas(url: string, run: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>("SELECT nspname AS name FROM pg_namespace WHERE starts_with(nspname, $1)", [
      `t_${run}_`,
    ]);
    for (const { name } of rows) await client.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
  } finally {
    await client.end();
  }
}
