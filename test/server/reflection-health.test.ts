import { fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcClient, type GrpcClient, grpcError, startTestServer, unary, type TestServer } from "./helpers.js";
import type { WireJson } from "../support/wire-json.js";

/** Sends reflection requests on one bidi stream and collects one response per request. */
async function reflect(client: GrpcClient, requests: object[]): Promise<WireJson[]> {
  const call = client.serverReflectionInfo() as grpc.ClientDuplexStream<object, WireJson>;
  const responses: WireJson[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on("data", (response) => responses.push(response));
    call.on("end", resolve);
    call.on("error", reject);
  });
  for (const request of requests) call.write(request);
  call.end();
  await done;
  return responses;
}

const fileNames = (response: WireJson): string[] =>
  response.fileDescriptorResponse.fileDescriptorProto.map((bytes: Buffer) => fromBinary(FileDescriptorProtoSchema, bytes).name);

describe("server reflection (grpc-js client, v1 and v1alpha)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ token: "secret" }); // reflection stays open behind a token
  });
  afterAll(() => t.close());

  for (const version of ["v1", "v1alpha"]) {
    it(`${version}: lists services and returns file descriptors for symbols and files`, async () => {
      const client = grpcClient(`grpc.reflection.${version}.ServerReflection`, t.address);
      const [list, method, message, file, missing] = await reflect(client, [
        { listServices: "" },
        { fileContainingSymbol: "agl.v1.LightningStore.EnqueueRollouts" },
        { fileContainingSymbol: "agl.v1.Statistics.RolloutsByStatusEntry" },
        { fileByFilename: "agl/v1/resources.proto" },
        { fileContainingSymbol: "agl.v1.NoSuchThing" },
      ]);
      client.close();

      const names = list.listServicesResponse.service.map((s: { name: string }) => s.name);
      expect(names).toEqual(
        expect.arrayContaining(["agl.v1.LightningStore", "agl.v1.ResourceService", "agl.v1.TripletService", "grpc.health.v1.Health"]),
      );
      expect(names).toContain(`grpc.reflection.${version}.ServerReflection`);

      // The file first, then its transitive dependencies.
      expect(fileNames(method)).toEqual(["agl/v1/store.proto", "agl/v1/types.proto", "google/protobuf/struct.proto"]);
      const store = fromBinary(FileDescriptorProtoSchema, method.fileDescriptorResponse.fileDescriptorProto[0]);
      expect(store.service.map((s: { name: string }) => s.name)).toEqual(["LightningStore"]);
      expect(fileNames(message)[0]).toBe("agl/v1/store.proto");
      expect(fileNames(file)[0]).toBe("agl/v1/resources.proto");
      expect(missing.errorResponse.errorCode).toBe(grpc.status.NOT_FOUND);
      expect(missing.originalRequest.fileContainingSymbol).toBe("agl.v1.NoSuchThing");
    });
  }
});

describe("grpc.health.v1.Health over gRPC", () => {
  let t: TestServer;
  let health: GrpcClient;
  beforeAll(async () => {
    t = await startTestServer();
    health = grpcClient("grpc.health.v1.Health", t.address);
  });
  afterAll(async () => {
    health.close();
    await t.close();
  });

  it("reports SERVING for the server and each service, NOT_FOUND for unknown ones, and lists them", async () => {
    expect(await unary(health, "check", { service: "" })).toEqual({ status: "SERVING" });
    expect(await unary(health, "check", { service: "agl.v1.ResourceService" })).toEqual({ status: "SERVING" });
    expect((await grpcError(unary(health, "check", { service: "nope.Service" }))).code).toBe(grpc.status.NOT_FOUND);
    const list = await unary(health, "list", {});
    expect(Object.keys(list.statuses)).toEqual(expect.arrayContaining(["", "agl.v1.LightningStore", "agl.v1.ResourceService"]));
  });

  it("Watch sees NOT_SERVING when the server shuts down", async () => {
    const other = await startTestServer();
    const client = grpcClient("grpc.health.v1.Health", other.address);
    const watch = client.watch({ service: "agl.v1.LightningStore" }) as grpc.ClientReadableStream<unknown>;
    const statuses: string[] = [];
    const ended = new Promise<void>((resolve) => {
      watch.on("data", (m) => statuses.push(m.status));
      watch.on("error", () => resolve());
      watch.on("end", () => resolve());
    });
    await new Promise<void>((resolve) => watch.once("data", () => resolve()));
    await other.close();
    await ended;
    client.close();
    expect(statuses).toEqual(["SERVING", "NOT_SERVING"]);
  });
});
