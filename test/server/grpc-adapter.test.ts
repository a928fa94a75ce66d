import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { addConnectService } from "../../src/server/grpc-adapter.js";
import { serviceRegistration } from "../../src/server/service-registration.js";
import { grpcClient, grpcError, type GrpcClient } from "./helpers.js";
import type { WireJson } from "../support/wire-json.js";

describe("addConnectService: a connect-es implementation on a plain grpc-js server", () => {
  let server: grpc.Server;
  let client: GrpcClient;
  let seen: { header?: string; binary?: string; timeoutMs?: number; protocol?: string } = {};

  beforeAll(async () => {
    server = new grpc.Server();
    addConnectService(
      server,
      serviceRegistration(LightningStore, {
        getStatistics(_req, ctx) {
          seen = {
            header: ctx.requestHeader.get("x-req") ?? undefined,
            binary: ctx.requestHeader.get("x-raw-bin") ?? undefined,
            timeoutMs: ctx.timeoutMs(),
            protocol: ctx.protocolName,
          };
          ctx.responseHeader.set("x-head", "h");
          ctx.responseTrailer.set("x-trail", "t");
          return { backend: "fake", totalRollouts: 3 };
        },
        getWorker(req) {
          throw new ConnectError(`no worker ${req.workerId}`, Code.NotFound, { "x-why": "gone" });
        },
      }),
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    client = grpcClient("agl.v1.LightningStore", `127.0.0.1:${port}`);
  });
  afterAll(() => {
    client.close();
    server.forceShutdown();
  });

  it("passes metadata in as request headers, and response headers and trailers out, with the deadline", async () => {
    const metadata = new grpc.Metadata();
    metadata.set("x-req", "hello");
    metadata.set("x-raw-bin", Buffer.from([1, 2, 3]));
    let header: grpc.Metadata | undefined;
    let trailer: grpc.Metadata | undefined;
    const response = await new Promise<WireJson>((resolve, reject) => {
      const call = client.getStatistics({}, metadata, { deadline: Date.now() + 5_000 }, (e: Error | null, r: unknown) =>
        e ? reject(e) : resolve(r),
      );
      call.on("metadata", (m: grpc.Metadata) => (header = m));
      call.on("status", (s: grpc.StatusObject) => (trailer = s.metadata));
    });
    expect(response).toMatchObject({ backend: "fake", totalRollouts: 3 });
    expect(seen.header).toBe("hello");
    expect(Buffer.from(seen.binary!, "base64")).toEqual(Buffer.from([1, 2, 3]));
    expect(seen.protocol).toBe("grpc");
    expect(seen.timeoutMs).toBeGreaterThan(4_000);
    expect(seen.timeoutMs).toBeLessThanOrEqual(5_000);
    expect(header?.get("x-head")).toEqual(["h"]);
    expect(trailer?.get("x-trail")).toEqual(["t"]);
  });

  it("sends a ConnectError's code, raw message and metadata; unimplemented methods are UNIMPLEMENTED", async () => {
    const error = await grpcError(
      new Promise((resolve, reject) => client.getWorker({ workerId: "w7" }, (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r)))),
    );
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    expect(error.details).toBe("no worker w7");
    expect(error.metadata.get("x-why")).toEqual(["gone"]);

    const unimplemented = await grpcError(
      new Promise((resolve, reject) =>
        client.getRollout({ rolloutId: "r" }, (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))),
      ),
    );
    expect(unimplemented.code).toBe(grpc.status.UNIMPLEMENTED);
  });

  it("answers undecodable request bytes with INVALID_ARGUMENT", async () => {
    const error = await grpcError(
      new Promise((resolve, reject) =>
        client.makeUnaryRequest(
          "/agl.v1.LightningStore/GetStatistics",
          (bytes: Buffer) => bytes,
          (bytes: Buffer) => bytes,
          Buffer.from([0x0a, 0xff, 0xff, 0xff]), // field 1, length-delimited, with a truncated length
          (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r)),
        ),
      ),
    );
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(error.details).toMatch(/cannot decode agl.v1.GetStatisticsRequest/);
  });
});
