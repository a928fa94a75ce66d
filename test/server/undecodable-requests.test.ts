/**
 * Requests whose bytes do not decode are the client's fault on every protocol: INVALID_ARGUMENT with the reason, and
 * nothing in the server's error log. connect-es answers some of them INTERNAL by itself (a binary Connect body, a
 * stream envelope flagged compressed without a compression); fuzzing found these.
 */
import * as http from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sanitizeError } from "../../src/server/error-logging.js";
import { startTestServer, type TestServer } from "./helpers.js";

const garbage = Buffer.from("ffffffffffffffffffff01", "hex"); // a varint that never ends
const envelope = (flags: number, payload: Buffer) => {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
};

describe("undecodable requests", () => {
  let t: TestServer;
  const logged: string[] = [];
  beforeAll(async () => {
    t = await startTestServer({ logger: { error: (message) => void logged.push(message) } });
  });
  afterAll(() => t.close());

  const post = async (path: string, contentType: string, body: Buffer, headers: Record<string, string> = {}) => {
    const res = await fetch(`${t.server.url}${path}`, { method: "POST", headers: { "content-type": contentType, ...headers }, body });
    const answer = Buffer.from(await res.arrayBuffer());
    return {
      status: res.status,
      headers: res.headers,
      contentType: res.headers.get("content-type") ?? "",
      grpcStatus: res.headers.get("grpc-status"),
      body: answer,
    };
  };

  it("Connect unary, binary: 400 invalid_argument naming the decoding error", async () => {
    const res = await post("/agl.v1.LightningStore/EnqueueRollouts", "application/proto", garbage);
    expect(res.status).toBe(400);
    const error = JSON.parse(res.body.toString()) as { code: string; message: string };
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toMatch(/^cannot decode the request message: /);
    // Sound requests still work on the same server.
    const ok = await post("/agl.v1.LightningStore/GetStatistics", "application/proto", Buffer.alloc(0));
    expect(ok.status).toBe(200);
  });

  it.each([
    ["a body that does not decode", envelope(0, garbage), /cannot decode the request message/],
    [
      "an envelope flagged compressed without a compression",
      envelope(1, Buffer.alloc(0)),
      /flagged compressed, but the request names no compression/,
    ],
  ])("Connect server streaming, %s: the stream ends with invalid_argument", async (_name, body, message) => {
    const res = await post("/agl.v1.ResourceService/WatchResources", "application/connect+proto", body, { "connect-timeout-ms": "2000" });
    expect(res.status).toBe(200);
    const end = JSON.parse(res.body.subarray(5).toString()) as { error: { code: string; message: string } };
    expect(res.body.readUInt8(0)).toBe(2);
    expect(end.error.code).toBe("invalid_argument");
    expect(end.error.message).toMatch(message);
  });

  it("gRPC-Web, binary: grpc-status INVALID_ARGUMENT", async () => {
    const res = await post("/agl.v1.LightningStore/EnqueueRollouts", "application/grpc-web+proto", envelope(0, garbage));
    expect(res.status).toBe(200);
    const status = res.grpcStatus ?? /grpc-status:\s*(\d+)/.exec(res.body.toString("latin1"))?.[1];
    expect(Number(status)).toBe(Code.InvalidArgument);
  });

  it("gRPC over HTTP/1.1: trailer grpc-status INVALID_ARGUMENT", async () => {
    const trailers = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const body = envelope(0, garbage);
      const req = http.request(`${t.server.url}/agl.v1.LightningStore/EnqueueRollouts`, {
        method: "POST",
        headers: { "content-type": "application/grpc+proto", "content-length": body.length, te: "trailers" },
      });
      req.on("response", (res) => {
        res.resume();
        res.on("end", () => resolve({ ...res.headers, ...res.trailers }));
      });
      req.on("error", reject);
      req.end(body);
    });
    expect(trailers["grpc-status"]).toBe(String(Code.InvalidArgument));
    expect(decodeURIComponent(String(trailers["grpc-message"]))).toMatch(/^cannot decode the request message: /);
  });

  // connect-es percent-encodes status messages for gRPC trailers, which throws on a lone surrogate: the call got no
  // answer at all. The JSON parser's message quotes half of the surrogate pair of U+B0650 here.
  it.each([
    ["gRPC-Web", "application/grpc-web+json"],
    ["gRPC over HTTP/1.1", "application/grpc+json"],
  ])("%s, JSON that does not parse, the reason quoting a lone surrogate: answered INVALID_ARGUMENT", async (_name, contentType) => {
    const res = await post("/agl.v1.ResourceService/GetLatestResources", contentType, envelope(0, Buffer.from("f2b09990", "hex")), {
      te: "trailers",
    });
    expect(res.status).toBe(200);
    const trailer = res.grpcStatus === null ? res.body.subarray(res.body.lastIndexOf(0x80) + 5).toString() : "";
    const status = res.grpcStatus ?? /grpc-status:\s*(\d+)/.exec(trailer)?.[1];
    const text = decodeURIComponent(res.headers.get("grpc-message") ?? /grpc-message:\s*(.*)/.exec(trailer)?.[1]?.trim() ?? "");
    expect(Number(status)).toBe(Code.InvalidArgument);
    expect(text).toMatch(/^the request is malformed/);
  });

  it("status messages reaching the client are well-formed UTF-16, whatever they quote", () => {
    const error = sanitizeError(
      new ConnectError("bad key \udc00 in \ud83d\ude00", Code.InvalidArgument),
      "/m",
      new AbortController().signal,
      {
        error: () => void logged.push("unexpected"),
      },
    );
    expect(error.code).toBe(Code.InvalidArgument);
    expect(error.rawMessage).toBe("bad key \ufffd in \ud83d\ude00");
    expect(() => encodeURIComponent(error.rawMessage)).not.toThrow();
  });

  it("native gRPC: INVALID_ARGUMENT", async () => {
    const client = new grpc.Client(t.address, grpc.credentials.createInsecure());
    const error = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        "/agl.v1.LightningStore/EnqueueRollouts",
        (b: Buffer) => b,
        (b: Buffer) => b,
        garbage,
        (e) => resolve(e),
      ),
    );
    client.close();
    expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(error?.details).toMatch(/cannot decode agl.v1.EnqueueRolloutsRequest/);
  });

  it("none of them reached the server's error log", () => {
    expect(logged).toEqual([]);
  });
});
