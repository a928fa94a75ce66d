import * as net from "node:net";
import * as tls from "node:tls";
import type { ServerTls } from "../core/tls.js";

/** Where the front server sends each connection. */
export interface ConnectionTargets {
  /** HTTP/2 (the preface, or ALPN "h2"): native gRPC. */
  http2(socket: net.Socket): void;
  /** Everything else: HTTP/1.1. */
  http1(socket: net.Socket): void;
}

/** Options of {@link createFrontServer}. */
export interface FrontServerOptions {
  targets: ConnectionTargets;
  /** PEM certificate chain and key: serve TLS (with ALPN) instead of plaintext; with `ca`, mutual TLS. */
  tls?: ServerTls;
  /** A connection that has not said which protocol it speaks within this time is closed. Default: 10 s. */
  peekTimeoutMs?: number;
}

/** A front server and the connections it accepted. */
export interface FrontServer {
  readonly server: net.Server;
  /** Starts listening; resolves to the bound port (useful with port 0). */
  listen(port: number, host: string): Promise<number>;
  /** Destroys every accepted connection that is still open. */
  destroyConnections(): void;
}

/** The first bytes every HTTP/2 client sends (RFC 9113 §3.4). */
export const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * One port for every protocol: plaintext connections are routed by their first bytes (the HTTP/2 preface or not);
 * TLS connections by ALPN. Offered both, a client gets HTTP/1.1: browsers and curl offer both and their Connect and
 * JSON calls need the HTTP/1.1 side, while gRPC clients offer only h2.
 */
export function createFrontServer(options: FrontServerOptions): FrontServer {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    // Small RPC frames must not wait for Nagle's algorithm and the peer's delayed ACK (about 40 ms per call).
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  const peekTimeoutMs = options.peekTimeoutMs ?? 10_000;
  let server: net.Server;
  if (options.tls === undefined) {
    server = net.createServer((socket) => {
      track(socket);
      routeByPreface(socket, options.targets, peekTimeoutMs);
    });
  } else {
    server = tls.createServer({
      cert: options.tls.cert,
      key: options.tls.key,
      ...(options.tls.ca === undefined ? {} : { ca: options.tls.ca, requestCert: true, rejectUnauthorized: true }),
      ALPNCallback: ({ protocols }) => ["http/1.1", "h2"].find((protocol) => protocols.includes(protocol)),
    });
    server.on("connection", track);
    server.on("secureConnection", (socket: tls.TLSSocket) => {
      if (socket.alpnProtocol === "h2") options.targets.http2(socket);
      else if (socket.alpnProtocol === "http/1.1") options.targets.http1(socket);
      else routeByPreface(socket, options.targets, peekTimeoutMs);
    });
    server.on("tlsClientError", (_error, socket) => socket.destroy());
  }
  return {
    server,
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as net.AddressInfo).port);
        });
      }),
    destroyConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

/**
 * Reads until the first bytes decide the protocol: the full HTTP/2 preface, or a byte that differs from it. A client
 * that has sent only a prefix of the preface is waited for.
 */
export function routeByPreface(socket: net.Socket, targets: ConnectionTargets, timeoutMs: number): void {
  let head = Buffer.alloc(0);
  const cleanup = () => {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("end", onEnd);
    socket.off("error", onError);
  };
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const n = Math.min(head.length, HTTP2_PREFACE.length);
    const isPreface = head.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
    if (isPreface && head.length < HTTP2_PREFACE.length) return;
    cleanup();
    // Paused, the bytes read so far stay buffered until the new owner takes them: an HTTP/2 session reads the
    // buffer when it starts; the HTTP/1.1 parser gets them as 'data' once the socket flows again.
    socket.pause();
    socket.unshift(head);
    if (isPreface) {
      targets.http2(socket);
    } else {
      targets.http1(socket);
      socket.resume();
    }
  };
  const onEnd = () => {
    cleanup();
    socket.destroy();
  };
  const onError = onEnd;
  const timer = setTimeout(onEnd, timeoutMs);
  timer.unref();
  socket.on("data", onData);
  socket.on("end", onEnd);
  socket.on("error", onError);
}
