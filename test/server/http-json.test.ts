import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResourceService } from "../../src/gen/agl/v1/resources_pb.js";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { curl, curlJson, startTestServer, type TestServer } from "./helpers.js";

describe("Connect, gRPC-Web and JSON over HTTP/1.1 on the same port", () => {
  let t: TestServer;
  let url: string;

  beforeAll(async () => {
    t = await startTestServer({
      // A plain HTTP route beside the RPCs, as OTLP and the LLM proxy will add.
      fallback: (req, res) => {
        if (req.url !== "/v1/traces") return void res.writeHead(404).end();
        res.writeHead(200, { "content-type": "application/json" }).end('{"partialSuccess":{}}');
      },
    });
    url = t.server.url;
  });
  afterAll(() => t.close());

  it("curl: enqueues and queries a rollout with Connect JSON", async () => {
    const enqueued = await curlJson(`${url}/agl.v1.LightningStore/EnqueueRollouts`, {
      rollouts: [{ input: { task: "add", a: 1 }, mode: "ROLLOUT_MODE_VAL" }],
    });
    expect(enqueued.status).toBe(200);
    const rollout = enqueued.json.rollouts[0];
    expect(rollout.status).toBe("ROLLOUT_STATUS_QUEUING");
    expect(rollout.input).toEqual({ task: "add", a: 1 });

    const queried = await curlJson(`${url}/agl.v1.LightningStore/QueryRollouts`, { rolloutIdIn: [rollout.rolloutId] });
    expect(queried.status).toBe(200);
    expect(queried.json.rollouts.map((r: { mode: string }) => r.mode)).toEqual(["ROLLOUT_MODE_VAL"]);
    // Proto field names are accepted too.
    const byProtoName = await curlJson(`${url}/agl.v1.LightningStore/GetRollout`, { rollout_id: rollout.rolloutId });
    expect(byProtoName.json.rolloutId).toBe(rollout.rolloutId);
  });

  it("curl: malformed JSON and wrong types are 400 invalid_argument; an unknown method is 404", async () => {
    const malformed = await curlJson(`${url}/agl.v1.LightningStore/EnqueueRollouts`, "{not json");
    expect(malformed.status).toBe(400);
    expect(malformed.json.code).toBe("invalid_argument");
    const wrongType = await curlJson(`${url}/agl.v1.LightningStore/EnqueueRollouts`, { rollouts: "many" });
    expect(wrongType.status).toBe(400);
    expect(wrongType.json.code).toBe("invalid_argument");
    const unknown = await curl("-H", "content-type: application/json", "-d", "{}", `${url}/agl.v1.LightningStore/NoSuchMethod`);
    expect(unknown.status).toBe(404);
  });

  it("curl: store errors come back as JSON with their code", async () => {
    const missing = await curlJson(`${url}/agl.v1.LightningStore/GetRollout`, { rolloutId: "ro-missing" });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe("not_found");
  });

  it("answers health over JSON: the Health service and GET /healthz", async () => {
    const check = await curlJson(`${url}/grpc.health.v1.Health/Check`, {});
    expect(check).toEqual({ status: 200, json: { status: "SERVING" } });
    const service = await curlJson(`${url}/grpc.health.v1.Health/Check`, { service: "agl.v1.LightningStore" });
    expect(service.json).toEqual({ status: "SERVING" });
    const healthz = await curl(`${url}/healthz`);
    expect(healthz.status).toBe(200);
    expect(JSON.parse(healthz.body)).toEqual({ status: "SERVING" });
  });

  it("passes unknown paths to the fallback handler", async () => {
    const traces = await curl("-X", "POST", "-d", "x", `${url}/v1/traces`);
    expect(traces).toEqual({ status: 200, body: '{"partialSuccess":{}}' });
  });

  it("connect-node clients: Connect (JSON and binary) and gRPC-Web over HTTP/1.1, gRPC over HTTP/2", async () => {
    const transports = {
      connectJson: createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: false }),
      connectBinary: createConnectTransport({ baseUrl: url, httpVersion: "1.1" }),
      grpcWeb: createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" }),
      grpc: createGrpcTransport({ baseUrl: url }),
    };
    for (const [name, transport] of Object.entries(transports)) {
      const client = createClient(LightningStore, transport);
      const { rollouts } = await client.enqueueRollouts({ rollouts: [{ metadata: { via: name } }] });
      const got = await client.getRollout({ rolloutId: rollouts[0]!.rolloutId });
      expect(got.metadata).toEqual({ via: name });
      expect(got.status).toBe(RolloutStatus.QUEUING);
      const error = await client.getRollout({ rolloutId: "ro-missing" }).catch((e: unknown) => ConnectError.from(e));
      expect(error).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.NotFound);
    }
  });

  it("gRPC-Web over HTTP/1.1 streams WatchResources", async () => {
    const resources = createClient(ResourceService, createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" }));
    const first = await resources.addResources({
      resources: { cfg: { kind: { case: "json", value: { kind: { case: "numberValue", value: 1 } } } } },
    });
    const abort = new AbortController();
    const stream = resources.watchResources({ includeLatest: true }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect((await stream.next()).value.resourcesId).toBe(first.resourcesId);
    const second = await resources.updateResources({ resourcesId: first.resourcesId, resources: {} });
    expect((await stream.next()).value.version).toBe(second.version);
    abort.abort();
    await expect(stream.next()).rejects.toMatchObject({ code: Code.Canceled });
  });
});
