/**
 * The storage backends the conformance suite runs against. Backend-specific code lives only here: every test file
 * iterates over `backends` with `describe.each`, so adding a backend (PostgreSQL) means adding one entry.
 *
 * `create()` returns a fresh, empty backend for one test. Closing it (the store closes it, and the harness closes it
 * again, idempotently) releases everything it created (the SQLite temp file, the PostgreSQL schema).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StorageBackend } from "../../src/store/backend.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createPostgresBackend } from "../../src/store/backends/postgres/postgres-backend.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { borrowSchema, postgresUrl, releaseSchema } from "../support/postgres.js";

export interface BackendDef {
  name: string;
  create(): Promise<StorageBackend>;
}

/** Wraps a backend so that `close()` is idempotent and runs `cleanup` once after the backend closed. */
function withCleanup(backend: StorageBackend, cleanup: () => void | Promise<void>): StorageBackend {
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      try {
        await backend.close();
      } finally {
        await cleanup();
      }
    })();
    return closing;
  };
  return new Proxy(backend, {
    get(target, prop) {
      if (prop === "close") return close;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

const memory: BackendDef = {
  name: "memory",
  create: async () => withCleanup(createMemoryBackend(), () => {}),
};

/** SQLite on a fresh file per test, removed (with its WAL files) when the backend closes. */
const sqlite: BackendDef = {
  name: "sqlite",
  create: async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-conformance-"));
    try {
      return withCleanup(createSqliteBackend({ path: join(dir, "store.db") }), () => rmSync(dir, { recursive: true, force: true }));
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
  },
};

/**
 * PostgreSQL (the server of test/support/postgres-global-setup.ts) in an empty schema per test, emptied again when
 * the backend closes. Without a server the tests fail with the reason; they are never skipped.
 */
const postgres: BackendDef = {
  name: "postgres",
  create: async () => {
    const schema = borrowSchema();
    try {
      const backend = await createPostgresBackend({ connectionString: postgresUrl(), schema, poolSize: 4 });
      return withCleanup(backend, () => releaseSchema(schema));
    } catch (error) {
      await releaseSchema(schema).catch(() => undefined);
      throw error;
    }
  },
};

/** Every backend, or those named in AGL_CONFORMANCE_BACKENDS (comma-separated), as the smoke run on other Node lines asks. */
export const backends: BackendDef[] = select([memory, sqlite, postgres], process.env.AGL_CONFORMANCE_BACKENDS);

function select(all: BackendDef[], names: string | undefined): BackendDef[] {
  if (!names) return all;
  return names.split(",").map((name) => {
    const def = all.find((d) => d.name === name.trim());
    if (!def) throw new Error(`AGL_CONFORMANCE_BACKENDS: no backend "${name}" (there are ${all.map((d) => d.name).join(", ")})`);
    return def;
  });
}
