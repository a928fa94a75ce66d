import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ResourceService } from "../../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../../src/gen/agl/v1/store_pb.js";
import { TripletService } from "../../../src/gen/agl/v1/triplets_pb.js";

/** The store's three services, as typed Connect clients. */
export interface StoreClients {
  store: Client<typeof LightningStore>;
  resources: Client<typeof ResourceService>;
  triplets: Client<typeof TripletService>;
}

export interface StoreClientsOptions {
  /** The store's origin; the dashboard is served by the store itself, so this is the page's origin. */
  baseUrl: string;
  /** Read at every call, so a token entered later applies without new clients. */
  token: () => string | undefined;
}

/**
 * Clients over the Connect protocol (binary protobuf, HTTP/1.1 fetch): unary calls and the WatchResources server
 * stream both work in browsers. Every call carries `authorization: Bearer <token>` once a token is known.
 */
export function createStoreClients(options: StoreClientsOptions): StoreClients {
  const auth: Interceptor = (next) => (req) => {
    const token = options.token();
    if (token !== undefined) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({ baseUrl: options.baseUrl, useBinaryFormat: true, interceptors: [auth] });
  return {
    store: createClient(LightningStore, transport),
    resources: createClient(ResourceService, transport),
    triplets: createClient(TripletService, transport),
  };
}
