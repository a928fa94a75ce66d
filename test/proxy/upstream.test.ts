/**
 * The proxy's connections to engines: a kept-alive connection the engine closed just as a request went out on it (its
 * idle time ran out) costs nothing; the request goes out again on a fresh connection. An engine that stops sending
 * mid-answer is given up after the idle timeout, saying so. Credentials in an engine's URL are sent as Basic auth.
 */
import * as http from "node:http";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createUpstream, readBody, type Upstream, UpstreamError } from "../../src/proxy/upstream.js";

/**
 * A real TCP server speaking just enough HTTP/1.1: each connection answers its first request and keeps the connection
 * open, then resets it when the next request arrives, unread, as an engine does whose idle time ran out.
 */
async function engineThatDropsIdleConnections(): Promise<{ url: URL; connections: () => number; close: () => void }> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    let answered = false;
    let received = "";
    socket.on("data", (chunk) => {
      if (answered) return void socket.resetAndDestroy();
      received += chunk.toString("latin1");
      const headersEnd = received.indexOf("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(received)?.[1] ?? 0);
      if (headersEnd < 0 || received.length < headersEnd + 4 + length) return;
      answered = true;
      const body = '{"tokens":[1,2,3]}';
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`,
      );
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return { url: new URL(`http://127.0.0.1:${port}/tokenize`), connections: () => connections, close: () => server.close() };
}

let upstream: Upstream | undefined;
let closeEngine: (() => void) | undefined;
afterEach(() => {
  upstream?.close();
  closeEngine?.();
});

describe("upstream connections", () => {
  it("sends a request again when the kept-alive connection it went out on was closed unread", async () => {
    const engine = await engineThatDropsIdleConnections();
    closeEngine = engine.close;
    upstream = createUpstream();
    const post = async () => {
      const res = await (upstream as Upstream).post(engine.url, Buffer.from("{}"), undefined, new AbortController().signal);
      return { status: res.status, body: JSON.parse((await readBody(res.body)).toString()) };
    };
    // The first call opens a connection; each later one is sent on it, reset, and sent again on a new one.
    for (let i = 0; i < 3; i++) expect(await post()).toEqual({ status: 200, body: { tokens: [1, 2, 3] } });
    expect(engine.connections()).toBe(3);
  });

  it("still fails a request whose connection is refused, saying so", async () => {
    const engine = await engineThatDropsIdleConnections();
    engine.close();
    upstream = createUpstream();
    const failure = upstream.post(engine.url, Buffer.from("{}"), undefined, new AbortController().signal);
    await expect(failure).rejects.toBeInstanceOf(UpstreamError);
    await expect(failure).rejects.toMatchObject({ kind: "connect", message: expect.stringMatching(/ECONNREFUSED/) });
  });

  it("gives up an answer whose engine stops sending for the idle timeout, saying so", async () => {
    const server = net.createServer((socket) => {
      socket.once("data", () =>
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"choices":'),
      );
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closeEngine = () => server.close();
    const { port } = server.address() as net.AddressInfo;
    upstream = createUpstream({ idleTimeoutMs: 200 });
    const res = await upstream.post(
      new URL(`http://127.0.0.1:${port}/v1/chat/completions`),
      Buffer.from("{}"),
      undefined,
      new AbortController().signal,
    );
    expect(res.status).toBe(200);
    const started = performance.now();
    await expect(readBody(res.body)).rejects.toThrow(`http://127.0.0.1:${port} sent nothing for 200 ms`);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
  });

  it("sends an engine's API key as a bearer token, else the credentials in its URL as Basic auth", async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      res.end(JSON.stringify({ authorization: req.headers.authorization ?? null }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closeEngine = () => server.close();
    const { port } = server.address() as net.AddressInfo;
    upstream = createUpstream();
    const seen = async (url: string, apiKey?: string) => {
      const res = await (upstream as Upstream).post(new URL(url), Buffer.from("{}"), apiKey, new AbortController().signal);
      return JSON.parse((await readBody(res.body)).toString()).authorization;
    };
    expect(await seen(`http://127.0.0.1:${port}/v1/chat/completions`)).toBeNull();
    expect(await seen(`http://vllm:s%40cret@127.0.0.1:${port}/v1/chat/completions`)).toBe(
      `Basic ${Buffer.from("vllm:s@cret").toString("base64")}`,
    );
    expect(await seen(`http://vllm:s%40cret@127.0.0.1:${port}/v1/chat/completions`, "sk-1")).toBe("Bearer sk-1");
  });
});
