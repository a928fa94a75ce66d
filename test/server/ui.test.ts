/**
 * The dashboard's files on the store's port: a real server on a real socket serving a small built UI from a temp
 * directory: content types, security headers, caching, gzip, client routes, paths it must leave alone, no way out of
 * the directory, no token for files while every RPC keeps its token, and a clear page when the UI is not built.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LightningStore } from "../../src/gen/agl/v1/store_pb.js";
import { RolloutMode } from "../../src/gen/agl/v1/types_pb.js";
import { createUiHandler } from "../../src/server/ui-handler.js";
import { writeSelfSignedCert } from "../support/self-signed-cert.js";
import { curl, startTestServer, type TestServer } from "./helpers.js";

const TOKEN = "ui-test-token";
const INDEX = '<!doctype html><html><head><script type="module" src="/assets/app-3f9a1c.js"></script></head><body></body></html>\n';
const APP = `export const views = ${JSON.stringify(Array.from({ length: 200 }, (_, i) => `view-${i}`))};\n`;
const SECRET = "top secret, outside the UI directory";

/** One raw HTTP/1.1 request, bytes exactly as given (fetch would normalise `..` away), and the whole answer. */
function rawGet(port: number, path: string, headers: Record<string, string> = {}, method = "GET") {
  return new Promise<{ status: number; headers: Record<string, string>; body: Buffer }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("end", () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf("\r\n\r\n");
      const [statusLine, ...lines] = all.subarray(0, split).toString("latin1").split("\r\n");
      const parsed: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        parsed[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine?.split(" ")[1]), headers: parsed, body: all.subarray(split + 4) });
    });
    const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n${extra.join("")}\r\n`);
  });
}

describe("the dashboard on the store's port", () => {
  let dir: string;
  let ui: string;
  let t: TestServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agl-ui-"));
    ui = join(dir, "ui");
    mkdirSync(join(ui, "assets"), { recursive: true });
    writeFileSync(join(ui, "index.html"), INDEX);
    writeFileSync(join(ui, "assets", "app-3f9a1c.js"), APP);
    writeFileSync(join(ui, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
    writeFileSync(join(dir, "secret.txt"), SECRET);
    symlinkSync(join(dir, "secret.txt"), join(ui, "assets", "leak.txt"));
    t = await startTestServer({ token: TOKEN, fallback: createUiHandler({ dir: ui }) });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves index.html at / with a strict policy, no inline scripts, nosniff, and revalidation by ETag", async () => {
    const res = await fetch(`${t.server.url}/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(INDEX);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const etag = res.headers.get("etag");
    expect(etag).toMatch(/^W\/"[0-9a-f]+-[0-9a-f]+"$/);
    const again = await fetch(`${t.server.url}/index.html`, { headers: { "if-none-match": etag! } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
  });

  it("serves hashed assets with their type, cached for good, gzipped when the client takes it", async () => {
    const plain = await rawGet(t.server.port, "/assets/app-3f9a1c.js");
    expect(plain.status).toBe(200);
    expect(plain.body.toString()).toBe(APP);
    expect(plain.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(plain.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    const zipped = await rawGet(t.server.port, "/assets/app-3f9a1c.js", { "accept-encoding": "br, gzip;q=0.8" });
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(zipped.headers.vary).toBe("accept-encoding");
    expect(Number(zipped.headers["content-length"])).toBe(zipped.body.length);
    expect(zipped.body.length).toBeLessThan(APP.length);
    expect(gunzipSync(zipped.body).toString()).toBe(APP);
    expect(
      (await rawGet(t.server.port, "/assets/app-3f9a1c.js", { "accept-encoding": "gzip;q=0" })).headers["content-encoding"],
    ).toBeUndefined();
    const svg = await rawGet(t.server.port, "/favicon.svg");
    expect([svg.status, svg.headers["content-type"]]).toEqual([200, "image/svg+xml"]);
    const head = await rawGet(t.server.port, "/assets/app-3f9a1c.js", {}, "HEAD");
    expect([head.status, head.headers["content-length"], head.body.length]).toEqual([200, String(APP.length), 0]);
  });

  it("answers the client's routes with index.html, and missing files with 404", async () => {
    for (const route of ["/rollouts", "/rollouts/ro-123abc?status=failed", "/apo/run-1/"]) {
      const res = await fetch(`${t.server.url}${route}`);
      expect([route, res.status, await res.text()]).toEqual([route, 200, INDEX]);
    }
    const missing = await fetch(`${t.server.url}/assets/missing-123.js`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(missing.headers.get("content-security-policy")).toContain("script-src 'self'");
  });

  it("never serves a file outside its directory", async () => {
    const attempts = [
      "/../secret.txt",
      "/%2e%2e/secret.txt",
      "/assets/..%2f..%2fsecret.txt",
      "/assets/%2e%2e/%2e%2e/secret.txt",
      "/..%5csecret.txt",
      "/%2e%2e%5csecret.txt",
      "//../secret.txt",
      `/${encodeURIComponent(join(dir, "secret.txt"))}`,
      "/assets/leak.txt",
      "/index.html%00.js",
      "/%E0%A4%A",
    ];
    for (const path of attempts) {
      const res = await rawGet(t.server.port, path);
      expect(res.body.toString(), path).not.toContain(SECRET);
      expect([path, res.status]).toEqual([path, 404]);
    }
  });

  it("needs no token for files, while every RPC still does, on the same port", async () => {
    expect((await fetch(`${t.server.url}/`)).status).toBe(200);
    const call = (headers: Record<string, string>) =>
      fetch(`${t.server.url}/agl.v1.LightningStore/GetRolloutTimeline`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: "{}",
      });
    expect((await call({})).status).toBe(401);
    expect((await call({ authorization: "Bearer wrong" })).status).toBe(401);
    const ok = await call({ authorization: `Bearer ${TOKEN}` });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { bucketCount: number }).bucketCount).toBe(1);
  });

  it("leaves RPC, proxy and health paths alone, and other methods", async () => {
    for (const path of [
      "/agl.v1.LightningStore/NoSuchMethod",
      "/grpc.health.v1.Health/",
      "/v1/models",
      "/rollout/ro-1/attempt/at-1/v1/models",
    ]) {
      const res = await fetch(`${t.server.url}${path}`);
      expect([path, res.status]).toEqual([path, 404]);
      expect(await res.text()).not.toContain("<html");
    }
    expect((await (await fetch(`${t.server.url}/healthz`)).json()) as unknown).toEqual({ status: "SERVING" });
    const post = await fetch(`${t.server.url}/`, { method: "POST", body: "x" });
    expect(post.status).toBe(404);
    expect(await post.text()).not.toContain("<html");
  });

  it("serves the new RPCs to Connect, gRPC-Web and gRPC clients with the token", async () => {
    await t.store.enqueueRollouts({ rollouts: [{ mode: RolloutMode.TRAIN }, { mode: RolloutMode.VAL }] });
    const headers = { authorization: `Bearer ${TOKEN}` };
    const transports = {
      connect: createConnectTransport({ baseUrl: t.server.url, httpVersion: "1.1" }),
      grpcWeb: createGrpcWebTransport({ baseUrl: t.server.url, httpVersion: "1.1" }),
      grpc: createGrpcTransport({ baseUrl: t.server.url }),
    };
    for (const [name, transport] of Object.entries(transports)) {
      const client = createClient(LightningStore, transport);
      const timeline = await client.getRolloutTimeline({}, { headers });
      expect([name, timeline.created.map((c) => [c.mode, c.count])]).toEqual([
        name,
        [
          [RolloutMode.TRAIN, 1],
          [RolloutMode.VAL, 1],
        ],
      ]);
      const rewards = await client.getRewardsByResources({ statusIn: [] }, { headers });
      expect(rewards.stats).toEqual([]);
      const page = await client.queryRollouts({ modeIn: [RolloutMode.VAL], includeFinalRewards: true }, { headers });
      expect([page.rollouts.length, page.page?.total]).toEqual([1, 1]);
      const error = await client.getRolloutTimeline({ startTime: 2, endTime: 1 }, { headers }).catch((e: unknown) => ConnectError.from(e));
      expect([name, (error as ConnectError).code]).toEqual([name, Code.InvalidArgument]);
      const denied = await client.getRolloutTimeline({}).catch((e: unknown) => ConnectError.from(e));
      expect([name, (denied as ConnectError).code]).toEqual([name, Code.Unauthenticated]);
    }
  });
});

describe("the dashboard over TLS", () => {
  it("is served to a client that offers h2 and HTTP/1.1, as browsers do (ALPN picks HTTP/1.1)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-ui-tls-"));
    const ui = join(dir, "ui");
    mkdirSync(ui);
    writeFileSync(join(ui, "index.html"), INDEX);
    const { cert, key } = writeSelfSignedCert(dir, "IP:127.0.0.1");
    const t = await startTestServer({ tls: { cert: readFileSync(cert), key: readFileSync(key) }, fallback: createUiHandler({ dir: ui }) });
    try {
      const res = await curl("--http2", "--cacert", cert, `${t.server.url}/rollouts`);
      expect([res.status, res.body]).toEqual([200, INDEX]);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the dashboard when it is not built", () => {
  let dir: string;
  let t: TestServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agl-ui-missing-"));
    t = await startTestServer({ fallback: createUiHandler({ dir: join(dir, "not-there") }) });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers 503 with a page that says how to build it, and the store keeps serving", async () => {
    for (const path of ["/", "/rollouts/ro-1", "/assets/app.js"]) {
      const res = await fetch(`${t.server.url}${path}`);
      expect([path, res.status]).toEqual([path, 503]);
      const text = await res.text();
      expect(text).toContain("make build");
      expect(text).toContain("--no-ui");
      expect(text).not.toContain("<script");
      expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    }
    const stats = await fetch(`${t.server.url}/agl.v1.LightningStore/GetStatistics`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(stats.status).toBe(200);
  });
});
