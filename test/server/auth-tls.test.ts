import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSelfSignedCert } from "../support/self-signed-cert.js";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { curl, curlJson, grpcClient, grpcError, startTestServer, unary, type TestServer } from "./helpers.js";

const bearer = (token: string) => {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return metadata;
};

describe("bearer token", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ token: "s3cret" });
  });
  afterAll(() => t.close());

  it("gRPC: missing or wrong token is UNAUTHENTICATED; the right one passes; health stays open", async () => {
    const store = grpcClient("agl.v1.LightningStore", t.address);
    const resources = grpcClient("agl.v1.ResourceService", t.address);
    const missing = await grpcError(unary(store, "getStatistics", {}));
    expect(missing.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(missing.details).toMatch(/missing bearer token/);
    const wrong = await grpcError(unary(store, "getStatistics", {}, bearer("guess")));
    expect(wrong.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(wrong.details).toBe("invalid bearer token");
    expect((await grpcError(unary(resources, "getLatestResources", {}))).code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await unary(store, "getStatistics", {}, bearer("s3cret"))).backend).toBe("memory");

    const health = grpcClient("grpc.health.v1.Health", t.address);
    expect(await unary(health, "check", { service: "" })).toEqual({ status: "SERVING" });
    for (const client of [store, resources, health]) client.close();
  });

  it("HTTP: missing or wrong token is 401 unauthenticated; the right one passes; health stays open", async () => {
    const url = `${t.server.url}/agl.v1.LightningStore/GetStatistics`;
    const missing = await curlJson(url, {});
    expect(missing.status).toBe(401);
    expect(missing.json.code).toBe("unauthenticated");
    expect((await curlJson(url, {}, "-H", "authorization: Bearer nope")).status).toBe(401);
    const ok = await curlJson(url, {}, "-H", "authorization: Bearer s3cret");
    expect(ok.status).toBe(200);
    expect(ok.json.backend).toBe("memory");

    expect((await curlJson(`${t.server.url}/grpc.health.v1.Health/Check`, {})).json).toEqual({ status: "SERVING" });
    expect((await curl(`${t.server.url}/healthz`)).status).toBe(200);
  });
});

describe("TLS (self-signed certificate made by openssl)", () => {
  let dir: string;
  let cert: Buffer;
  let t: TestServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agl-tls-"));
    writeSelfSignedCert(dir);
    cert = readFileSync(join(dir, "cert.pem"));
    t = await startTestServer({ tls: { cert, key: readFileSync(join(dir, "key.pem")) } });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reports an https:// URL", () => {
    expect(t.server.url).toBe(`https://127.0.0.1:${t.server.port}`);
  });

  it("serves grpc-js and the connect-node gRPC client over TLS (ALPN h2)", async () => {
    const store = grpcClient("agl.v1.LightningStore", t.address, grpc.credentials.createSsl(cert));
    const { rollouts } = await unary(store, "enqueueRollouts", { rollouts: [{}] });
    expect((await unary(store, "getRollout", { rolloutId: rollouts[0].rolloutId })).status).toBe("ROLLOUT_STATUS_QUEUING");
    store.close();

    const client = createClient(LightningStore, createGrpcTransport({ baseUrl: t.server.url, nodeOptions: { ca: cert } }));
    expect((await client.getStatistics({})).totalRollouts).toBe(1);
  });

  it("serves JSON over HTTPS to curl (which offers h2 and http/1.1)", async () => {
    const stats = await curlJson(`${t.server.url}/agl.v1.LightningStore/GetStatistics`, {}, "--cacert", join(dir, "cert.pem"));
    expect(stats.status).toBe(200);
    expect(stats.json.backend).toBe("memory");
    const healthz = await curl("--cacert", join(dir, "cert.pem"), `${t.server.url}/healthz`);
    expect(healthz.status).toBe(200);
  });
});

describe("one bearer check for every route of `agl serve --proxy`", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess(["--memory", "--token", "s3cret", "--proxy-backend", "http://127.0.0.1:9/v1", "--proxy-model", "m"]);
  });
  afterAll(() => server.stop());

  it("RPCs, OTLP ingest and the proxy's routes accept and refuse the same authorization headers, with the same reason", async () => {
    const routes = [
      { name: "rpc", path: "/agl.v1.LightningStore/GetStatistics", body: "{}", accepted: 200 },
      { name: "otlp", path: "/v1/traces", body: "{}", accepted: 200 },
      { name: "proxy admin", path: "/proxy/drain", body: "{}", accepted: 200 },
    ];
    const headers = ["", "Bearer s3cret", "bearer s3cret", "Bearer   s3cret ", "Bearer s3cre", "Bearer s3cretX", "Basic s3cret"];
    for (const authorization of headers) {
      const verdicts: { ok: boolean; reason: string | undefined }[] = [];
      for (const route of routes) {
        const res = await fetch(`${server.url}${route.path}`, {
          method: "POST",
          body: route.body,
          headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        });
        const body = (await res.json()) as { message?: string; error?: { message?: string } };
        const reason = res.status === 401 ? (body.message ?? body.error?.message) : "";
        verdicts.push({ ok: res.status === route.accepted, reason });
        expect([route.accepted, 401], `${route.name} with "${authorization}"`).toContain(res.status);
      }
      // Every route gives the first route's verdict and reason.
      expect(verdicts, `authorization "${authorization}"`).toEqual(routes.map(() => verdicts[0]));
    }
  });
});
