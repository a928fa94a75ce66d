import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResourcesUpdateSchema, WorkerSchema } from "../../src/gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore } from "../../src/store/store.js";
import { curlJson, grpcClient, grpcError, startTestServer, unary, type GrpcClient, type TestServer } from "./helpers.js";

const limit = 64 * 1024;

describe("message-size limits", () => {
  let t: TestServer;
  let store: GrpcClient;
  beforeAll(async () => {
    const real = createStore({ backend: createMemoryBackend() });
    const wrapped: StoreApi = {
      ...real,
      // A response over the limit: the server must refuse to send it.
      async getWorker(request) {
        return create(WorkerSchema, { workerId: request.workerId ?? "", currentRolloutId: "x".repeat(2 * limit) });
      },
    };
    t = await startTestServer({ store: wrapped, maxMessageBytes: limit });
    store = grpcClient("agl.v1.LightningStore", t.address);
  });
  afterAll(async () => {
    store.close();
    await t.close();
  });

  it("gRPC: an oversized request is RESOURCE_EXHAUSTED and the server stays up", async () => {
    const big = { rollouts: [{ groupId: "g".repeat(2 * limit) }] };
    expect((await grpcError(unary(store, "enqueueRollouts", big))).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((await unary(store, "enqueueRollouts", { rollouts: [{ groupId: "small" }] })).rollouts).toHaveLength(1);
  });

  it("gRPC: an oversized response is RESOURCE_EXHAUSTED", async () => {
    const error = await grpcError(unary(store, "getWorker", { workerId: "w" }));
    expect(error.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((await unary(store, "getStatistics", {})).backend).toBe("memory");
  });

  it("HTTP: oversized requests and responses are resource_exhausted and the server stays up", async () => {
    const request = await curlJson(`${t.server.url}/agl.v1.LightningStore/EnqueueRollouts`, {
      rollouts: [{ groupId: "g".repeat(2 * limit) }],
    });
    expect(request.json.code).toBe("resource_exhausted");
    const response = await curlJson(`${t.server.url}/agl.v1.LightningStore/GetWorker`, { workerId: "w" });
    expect(response.json.code).toBe("resource_exhausted");
    expect((await curlJson(`${t.server.url}/agl.v1.LightningStore/GetStatistics`, {})).status).toBe(200);
  });
});

describe("unexpected errors", () => {
  let t: TestServer;
  const logged: string[] = [];
  beforeAll(async () => {
    const real = createStore({ backend: createMemoryBackend() });
    const wrapped: StoreApi = {
      ...real,
      async getStatistics() {
        throw new Error("disk /var/secret/agl.db is on fire");
      },
      async getRollout() {
        throw new ConnectError("sql: constraint violated in table secret", Code.Internal);
      },
    };
    t = await startTestServer({ store: wrapped, logger: { error: (message, error) => logged.push(`${message} ${String(error)}`) } });
  });
  afterAll(() => t.close());

  it("a plain Error or an INTERNAL ConnectError reaches clients as INTERNAL 'internal error' and is logged", async () => {
    const store = grpcClient("agl.v1.LightningStore", t.address);
    const plain = await grpcError(unary(store, "getStatistics", {}));
    expect(plain.code).toBe(grpc.status.INTERNAL);
    expect(plain.details).toBe("internal error");
    const internal = await grpcError(unary(store, "getRollout", { rolloutId: "r" }));
    expect(internal.code).toBe(grpc.status.INTERNAL);
    expect(internal.details).toBe("internal error");
    store.close();

    const http = await curlJson(`${t.server.url}/agl.v1.LightningStore/GetStatistics`, {});
    expect(http.status).toBe(500);
    expect(http.json).toEqual({ code: "internal", message: "internal error" });

    expect(logged).toHaveLength(3);
    expect(logged[0]).toMatch(/\/agl\.v1\.LightningStore\/GetStatistics.*on fire/);
    expect(logged[1]).toMatch(/\/agl\.v1\.LightningStore\/GetRollout.*constraint violated/);
    expect(logged[2]).toMatch(/GetStatistics.*on fire/);
  });
});

describe("server streams on grpc-js", () => {
  let t: TestServer;
  let produced = 0;
  let stopped: () => void;
  const generatorStopped = new Promise<void>((resolve) => (stopped = resolve));
  beforeAll(async () => {
    const real = createStore({ backend: createMemoryBackend() });
    const wrapped: StoreApi = {
      ...real,
      async *watchResources() {
        try {
          for (let version = 1; version <= 400; version++) {
            produced++;
            const blob = {
              kind: { case: "json" as const, value: { kind: { case: "stringValue" as const, value: "x".repeat(256 * 1024) } } },
            };
            yield create(ResourcesUpdateSchema, { resourcesId: "rs", version, resources: { blob } });
          }
        } finally {
          stopped();
        }
      },
    };
    t = await startTestServer({ store: wrapped });
  });
  afterAll(() => t.close());

  it("respect backpressure from a slow client and stop the generator when the client cancels", async () => {
    const client = grpcClient("agl.v1.ResourceService", t.address, undefined, { "grpc.max_receive_message_length": -1 });
    const call = client.watchResources({}) as grpc.ClientReadableStream<unknown>;
    await new Promise<void>((resolve) => call.once("data", () => resolve()));
    call.pause();
    await new Promise((r) => setTimeout(r, 500));
    // 400 messages of 256 KiB are ready; a paused client must hold the producer to a few buffered ones.
    expect(produced).toBeLessThan(60);
    call.on("error", () => undefined);
    call.cancel();
    await generatorStopped;
    expect(produced).toBeLessThan(60);
    client.close();
  });
});
