/**
 * The store in process (`agl/store`), for whoever runs a store themselves rather than calling one over the network:
 * the state machine over a storage backend, and the three backends — in memory, SQLite (one file) and PostgreSQL
 * (several servers may share one database).
 *
 * @example
 * ```ts
 * import { createPostgresBackend, createStore } from "agl/store";
 * const store = createStore({ backend: await createPostgresBackend({ connectionString: process.env.DATABASE_URL! }) });
 * ```
 * @module
 */
export { createStore } from "./store/store.js";
export type { Store, StoreOptions } from "./store/store.js";
export type { StoreLimits } from "./store/validate.js";
export type { PendingWrites } from "./store/pending-writes.js";
export type { StoreApi, StoreCallOptions } from "./store/store-api.js";

/** Storage backends; every one runs the same state machine, so the semantics are the same on each. */
export { createMemoryBackend } from "./store/backends/memory/memory-backend.js";
export { createSqliteBackend } from "./store/backends/sqlite/sqlite-backend.js";
export type { SqliteBackendOptions } from "./store/backends/sqlite/sqlite-backend.js";
export { createPostgresBackend } from "./store/backends/postgres/postgres-backend.js";
export type { PostgresBackendOptions } from "./store/backends/postgres/postgres-backend.js";
export type { StorageBackend, StoreEvent } from "./store/backend.js";
