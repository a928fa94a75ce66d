/**
 * vitest globalSetup: makes a real PostgreSQL server available to the suite. With AGL_TEST_POSTGRES_URL set (as
 * `make test` does), that server is used; otherwise `scripts/postgres.sh` installs and starts the project's private
 * server for this run (under a lease, so concurrent runs share it) and stops it afterwards. If it cannot start, the
 * PostgreSQL tests fail with the reason; the others still run.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The server's URL, or "" when it could not be started. */
    postgresUrl: string;
    /** Why there is no server, when `postgresUrl` is "". */
    postgresError: string;
  }
}

const script = fileURLToPath(new URL("../../scripts/postgres.sh", import.meta.url));

export default function setup(project: TestProject): (() => void) | undefined {
  const given = process.env["AGL_TEST_POSTGRES_URL"];
  if (given) {
    project.provide("postgresUrl", given);
    project.provide("postgresError", "");
    return undefined;
  }
  const env = { ...process.env, AGL_POSTGRES_LEASE: String(process.pid) };
  try {
    const url = execFileSync(script, ["start"], { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
    project.provide("postgresUrl", url);
    project.provide("postgresError", "");
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? "";
    project.provide("postgresUrl", "");
    project.provide("postgresError", `scripts/postgres.sh start failed: ${stderr || String(error)}`);
    return undefined;
  }
  return () => {
    execFileSync(script, ["stop"], { env, stdio: ["ignore", "ignore", "inherit"] });
  };
}
