/**
 * TLS between hosts with a CA the test makes (openssl): the store server with mutual TLS and the store and triplet
 * clients verifying it against the CA file; the LLM proxy served over TLS, verifying an https engine against the CA.
 * A client without a certificate, or one that trusts another CA, gets no connection.
 */
import { readFileSync } from "node:fs";
import * as https from "node:https";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStoreClient } from "../../src/client/store-client.js";
import { silentLogger } from "../../src/core/logger.js";
import { createLlmProxy } from "../../src/proxy/llm-proxy.js";
import { createTripletClient } from "../../src/triplets/triplet-client.js";
import { createTestCa, type TestCa } from "../support/test-ca.js";
import { startTestServer, type TestServer } from "./helpers.js";

let dir: string;
let ca: TestCa;
let other: TestCa;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-mtls-"));
  ca = createTestCa(dir);
  other = createTestCa(mkdtempSync(join(dir, "other-")));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pem = (files: { cert: string; key: string }) => ({ cert: readFileSync(files.cert), key: readFileSync(files.key) });

describe("store server with mutual TLS", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ tls: { ...pem(ca.server("store", "IP:127.0.0.1")), ca: readFileSync(ca.caFile) } });
  });
  afterAll(() => t?.close());

  it("serves clients that verify it against the CA file and present a certificate it signed", async () => {
    const me = pem(ca.client("runner-1"));
    const client = createStoreClient({ baseUrl: t.server.url, caFile: ca.caFile, tls: me, maxTries: 1 });
    const connect = createStoreClient({ baseUrl: t.server.url, protocol: "connect", tls: { ...me, ca: readFileSync(ca.caFile) } });
    const triplets = createTripletClient({ baseUrl: t.server.url, tls: { ...me, ca: readFileSync(ca.caFile) } });
    try {
      expect(t.server.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
      await client.enqueueRollouts({ rollouts: [{}] });
      expect((await connect.getStatistics({})).totalRollouts).toBe(1);
      const missing = await triplets.getRolloutTriplets({ rolloutId: "ro-missing" }).catch((e: unknown) => ConnectError.from(e));
      expect((missing as ConnectError).code).toBe(Code.NotFound);
    } finally {
      client.close();
      connect.close();
      triplets.close();
    }
  });

  it("refuses a client without a certificate, and a client that trusts another CA", async () => {
    const anonymous = createStoreClient({ baseUrl: t.server.url, caFile: ca.caFile, maxTries: 1, timeoutMs: 5_000 });
    const wrongCa = createStoreClient({
      baseUrl: t.server.url,
      caFile: other.caFile,
      tls: pem(ca.client("r2")),
      maxTries: 1,
      timeoutMs: 5_000,
    });
    const otherCert = createStoreClient({
      baseUrl: t.server.url,
      caFile: ca.caFile,
      tls: pem(other.client("r3")),
      maxTries: 1,
      timeoutMs: 5_000,
    });
    try {
      for (const client of [anonymous, wrongCa, otherCert]) {
        const error = await client.getStatistics({}).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        expect(error?.code).toBe(Code.Unavailable);
      }
    } finally {
      for (const client of [anonymous, wrongCa, otherCert]) client.close();
    }
  });
});

describe("LLM proxy over TLS, towards an https engine", () => {
  it("serves https, verifies the engine against the CA, and refuses an engine the CA did not sign", async () => {
    const answer = JSON.stringify({
      id: "c1",
      object: "chat.completion",
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }],
    });
    const startEngine = async (files: { cert: string; key: string }) => {
      const server = https.createServer(pem(files), (req, res) => {
        req.resume();
        req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(answer));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
    };
    const good = await startEngine(ca.server("engine", "IP:127.0.0.1"));
    const rogue = await startEngine(other.server("rogue", "IP:127.0.0.1"));
    const t = await startTestServer();
    const makeProxy = (endpoint: string) =>
      createLlmProxy({
        store: t.store,
        backends: [{ endpoint, model: "m" }],
        maxRetries: 0,
        upstream: { tls: { ca: readFileSync(ca.caFile) } },
        logger: silentLogger,
      });
    const proxy = makeProxy(good.url);
    const rogueProxy = makeProxy(rogue.url);
    try {
      const url = await proxy.listen(0, "127.0.0.1", pem(ca.server("proxy", "IP:127.0.0.1")));
      const rogueUrl = await rogueProxy.listen(0, "127.0.0.1", pem(ca.server("proxy2", "IP:127.0.0.1")));
      expect(url).toMatch(/^https:/);
      const post = (base: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = https.request(
            `${base}/v1/chat/completions`,
            { method: "POST", ca: readFileSync(ca.caFile), headers: { "content-type": "application/json" } },
            (res) => {
              let body = "";
              res.on("data", (c: Buffer) => (body += c.toString()));
              res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
            },
          );
          req.on("error", reject);
          req.end(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }));
        });
      const ok = await post(url);
      expect(ok.status, ok.body).toBe(200);
      expect(JSON.parse(ok.body).choices[0].message.content).toBe("hello");
      const refused = await post(rogueUrl);
      expect(refused.status).toBe(502);
      expect(refused.body).toMatch(/engine_unavailable|SELF_SIGNED|UNABLE_TO_VERIFY|certificate/i);
    } finally {
      await proxy.close();
      await rogueProxy.close();
      await t.close();
      good.server.close();
      rogue.server.close();
    }
  });
});
