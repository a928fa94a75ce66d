import * as net from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import type { StoreApi } from "../../src/store/store-api.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore } from "../../src/store/store.js";
import { grpcClient, grpcError, startTestServer, unary } from "./helpers.js";

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.on("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.on("error", () => resolve(true));
  });

describe("graceful shutdown", () => {
  it("ends long-polls on both stacks with UNAVAILABLE, closes idle connections and stops accepting", async () => {
    const t = await startTestServer();
    const grpcStore = grpcClient("agl.v1.LightningStore", t.address);
    const connectStore = createClient(LightningStore, createConnectTransport({ baseUrl: t.server.url, httpVersion: "1.1" }));
    // An idle keep-alive connection on the HTTP/1.1 side must not hold the close up.
    await connectStore.getStatistics({});

    const grpcPoll = grpcError(unary(grpcStore, "dequeueRollouts", { workerId: "a", waitSeconds: 60 }));
    const httpPoll = connectStore.dequeueRollouts({ workerId: "b", waitSeconds: 60 }).catch((e: unknown) => ConnectError.from(e));
    await new Promise((r) => setTimeout(r, 200));

    const t0 = Date.now();
    await t.server.close();
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect((await grpcPoll).code).toBe(grpc.status.UNAVAILABLE);
    const httpError = await httpPoll;
    expect(httpError).toBeInstanceOf(ConnectError);
    expect((httpError as ConnectError).code).toBe(Code.Unavailable);
    expect(await refused(t.server.port)).toBe(true);
    grpcStore.close();
    await t.store.close();
  });

  it("cuts off calls that ignore their signal once the grace period is over", async () => {
    const real = createStore({ backend: createMemoryBackend() });
    const stuck: StoreApi = { ...real, getStatistics: () => new Promise(() => undefined) };
    const t = await startTestServer({ store: stuck, shutdownGraceMs: 300 });
    const store = grpcClient("agl.v1.LightningStore", t.address);
    const call = grpcError(unary(store, "getStatistics", {}));
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    await t.server.close();
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(2_000);
    expect((await call).code).toBeGreaterThan(0);
    store.close();
    await t.close();
    await real.close();
  });
});
