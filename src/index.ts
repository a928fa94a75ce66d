/**
 * agl: train TypeScript agents by RL and prompt optimization, around one protobuf-defined store.
 *
 * @example
 * ```ts
 * import { createStoreClient } from "agl";
 * const store = createStoreClient({ baseUrl: "http://127.0.0.1:4747" });
 * await store.enqueueRollouts({ rollouts: [{ metadata: { task: 1 } }] });
 * ```
 * @module
 */

/** The store's API, shared by the in-process store and the network client. */
export type { StoreApi, StoreCallOptions } from "./store/store-api.js";

/** The store in process: the state machine over a storage backend. */
export { createStore } from "./store/store.js";
export type { Store, StoreOptions } from "./store/store.js";
export type { StoreLimits } from "./store/validate.js";

/** Storage backends. */
export { createMemoryBackend } from "./store/memory-backend.js";
export { createSqliteBackend } from "./store/sqlite-backend.js";
export type { SqliteBackendOptions } from "./store/sqlite-backend.js";
export type { StorageBackend, StorageTx, StoreEvent } from "./store/backend.js";

/** The store server and its client. */
export { startStoreServer } from "./server/store-server.js";
export type { StoreServer, StoreServerOptions } from "./server/store-server.js";
export { createStoreClient } from "./client/store-client.js";
export type { StoreClient, StoreClientOptions } from "./client/store-client.js";
