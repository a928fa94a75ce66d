import type { CallOptions, Client } from "@connectrpc/connect";
import type { ResourceService } from "../gen/agl/v1/resources_pb.js";
import type { LightningStore } from "../gen/agl/v1/store_pb.js";

/**
 * The store as seen by every caller: one method per RPC of `LightningStore` and `ResourceService`, taking the
 * request (a plain init object or a message) and returning the response message. Errors are `ConnectError`s with
 * gRPC codes. The in-process store and the network client (`createStoreClient`) both have this shape, so runners,
 * algorithms and trainers work against either.
 */
export type StoreApi = Client<typeof LightningStore> & Client<typeof ResourceService>;

/** Per-call options: `signal` ends waits early; `timeoutMs` bounds the call. */
export type StoreCallOptions = CallOptions;
