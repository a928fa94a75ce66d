import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { type Rollout, type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore, type Store, type StoreOptions } from "../../src/store/store.js";
import type { StoreApi } from "../../src/store/store-api.js";

/** A real store server on a loopback socket, with a gRPC client to it. */
export interface StoreHarness {
  store: Store;
  server: StoreServer;
  client: StoreClient;
  url: string;
  close(): Promise<void>;
}

/**
 * Starts an in-memory store behind a real server on port 0 (watchdog every `watchdogSeconds`, default 0.2 s; `store`:
 * further store options, such as shorter liveness defaults).
 */
export async function startStoreHarness(
  options: { watchdogSeconds?: number; store?: Partial<Omit<StoreOptions, "backend">> } = {},
): Promise<StoreHarness> {
  const store = createStore({
    backend: createMemoryBackend(),
    watchdogIntervalSeconds: options.watchdogSeconds ?? 0.2,
    scanDebounceSeconds: 0,
    ...options.store,
  });
  const server = await startStoreServer({ store, port: 0 });
  const client = createStoreClient({ baseUrl: server.url });
  return {
    store,
    server,
    client,
    url: server.url,
    async close() {
      client.close();
      await server.close();
      await store.close();
    },
  };
}

/** A protobuf `Value` for a rollout input. */
export const jsonValue = (value: JsonValue) => fromJson(ValueSchema, value);

/** Waits until `rolloutIds` are all finished (or throws after `timeoutSeconds`). */
export async function waitFinished(client: StoreClient | Store, rolloutIds: string[], timeoutSeconds = 20): Promise<Rollout[]> {
  const { rollouts } = await client.waitForRollouts({ rolloutIds, timeoutSeconds });
  if (rollouts.length !== rolloutIds.length) {
    const { rollouts: all } = await client.queryRollouts({ rolloutIdIn: rolloutIds });
    throw new Error(
      `only ${rollouts.length} of ${rolloutIds.length} rollouts finished: ${all.map((r) => `${r.rolloutId}=${r.status}`).join(", ")}`,
    );
  }
  return rollouts;
}

/** Enqueues one rollout and claims it: the ids of its running attempt. */
export async function claimAttempt(client: StoreApi): Promise<{ rolloutId: string; attemptId: string }> {
  await client.enqueueRollouts({ rollouts: [{ input: jsonValue({}) }] });
  const [rollout] = (await client.dequeueRollouts({ workerId: "w" })).rollouts;
  return { rolloutId: rollout!.rolloutId, attemptId: rollout!.latestAttempt!.attemptId };
}

/** `n` spans of an attempt, with ids made from `prefix` and their index. */
export const makeSpans = (ids: { rolloutId: string; attemptId: string }, n: number, prefix = "s"): Span[] =>
  Array.from({ length: n }, (_, i) =>
    create(SpanSchema, {
      ...ids,
      spanId: `${prefix}${i.toString(16).padStart(15, "0")}`.slice(0, 16),
      traceId: "ab".repeat(16),
      name: `span-${i}`,
    }),
  );
