import * as net from "node:net";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createFrontServer, HTTP2_PREFACE, type FrontServer } from "../../src/server/front-server.js";

interface Routed {
  kind: "http1" | "http2";
  /** The bytes the new owner reads first. */
  head: Buffer;
}

/** A front server whose targets record the protocol and what the socket yields next. */
async function recordingServer(peekTimeoutMs = 10_000) {
  const routed: Routed[] = [];
  let notify: () => void = () => undefined;
  const take = (kind: Routed["kind"]) => (socket: net.Socket) => {
    socket.once("data", (head: Buffer) => {
      routed.push({ kind, head });
      notify();
      socket.end();
    });
    socket.resume();
  };
  const front = createFrontServer({ targets: { http1: take("http1"), http2: take("http2") }, peekTimeoutMs });
  await new Promise<void>((resolve) => front.server.listen(0, "127.0.0.1", resolve));
  const port = (front.server.address() as AddressInfo).port;
  const next = () => new Promise<Routed>((resolve) => (notify = () => resolve(routed[routed.length - 1]!)));
  return { front, port, routed, next };
}

const connect = (port: number) =>
  new Promise<net.Socket>((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => resolve(socket));
  });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("front server: routing connections by their first bytes", () => {
  let front: FrontServer | undefined;
  afterEach(async () => {
    front?.destroyConnections();
    await new Promise((r) => front?.server.close(r));
  });

  it("waits while a client has sent only part of the HTTP/2 preface, then routes to HTTP/2 with every byte", async () => {
    const s = await recordingServer();
    front = s.front;
    const socket = await connect(s.port);
    const routed = s.next();
    socket.write(HTTP2_PREFACE.subarray(0, 5));
    await sleep(50);
    socket.write(HTTP2_PREFACE.subarray(5, 17));
    await sleep(50);
    expect(s.routed).toHaveLength(0);
    socket.write(Buffer.concat([HTTP2_PREFACE.subarray(17), Buffer.from("frames")]));
    const { kind, head } = await routed;
    expect(kind).toBe("http2");
    expect(head.subarray(0, HTTP2_PREFACE.length).equals(HTTP2_PREFACE)).toBe(true);
    socket.destroy();
  });

  it("routes to HTTP/1.1 as soon as a byte differs from the preface, keeping the bytes", async () => {
    const s = await recordingServer();
    front = s.front;
    const socket = await connect(s.port);
    const routed = s.next();
    socket.write("PRI * HTTP/1.1"); // shares a prefix with the preface, then differs
    const { kind, head } = await routed;
    expect(kind).toBe("http1");
    expect(head.toString()).toBe("PRI * HTTP/1.1");

    const other = await connect(s.port);
    const routed2 = s.next();
    other.write("GET /healthz HTTP/1.1\r\n\r\n");
    expect(await routed2).toEqual({ kind: "http1", head: Buffer.from("GET /healthz HTTP/1.1\r\n\r\n") });
    socket.destroy();
    other.destroy();
  });

  it("closes a connection that says nothing within the peek timeout", async () => {
    const s = await recordingServer(100);
    front = s.front;
    const socket = await connect(s.port);
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    socket.write("PRI * HT");
    await closed;
    expect(s.routed).toHaveLength(0);
  });
});
