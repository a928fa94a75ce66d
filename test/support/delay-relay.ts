/**
 * A delaying TCP relay: listens on `host:port` and forwards every connection to `target`, holding each chunk for
 * `oneWayMs` in each direction, in order — a link with a round trip of twice that. This kernel has no `netem`, so the
 * latency bench puts this in the trainer's path. Transparent to TLS (it never looks into the bytes).
 */
import { connect, createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

export interface DelayRelay {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

export interface DelayRelayOptions {
  /** Where to listen (default 127.0.0.1; port 0 picks one). */
  host?: string;
  port?: number;
  /** `host:port` to forward to. */
  target: { host: string; port: number };
  /** Delay of each direction, in ms (a round trip is twice this). */
  oneWayMs: number;
}

/** Forwards `from` to `to`, each chunk `delayMs` after it arrived, in arrival order. */
function pipeDelayed(from: Socket, to: Socket, delayMs: number): void {
  const queue: { at: number; chunk: Buffer }[] = [];
  let scheduled = false;
  let ended = false;
  const schedule = (ms: number) => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(flush, ms);
  };
  const flush = () => {
    scheduled = false;
    const now = Date.now();
    while (queue.length > 0 && (queue[0]?.at ?? 0) <= now) to.write((queue.shift() as { chunk: Buffer }).chunk);
    if (queue.length > 0) schedule((queue[0]?.at ?? now) - now);
    else if (ended) to.end();
  };
  from.on("data", (chunk: Buffer) => {
    queue.push({ at: Date.now() + delayMs, chunk });
    schedule(delayMs);
  });
  from.on("end", () => {
    ended = true;
    schedule(delayMs);
  });
}

/** Starts the relay. */
export async function startDelayRelay(options: DelayRelayOptions): Promise<DelayRelay> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(options.target.port, options.target.host);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pipeDelayed(client, upstream, options.oneWayMs);
    pipeDelayed(upstream, client, options.oneWayMs);
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, resolve);
  });
  return {
    host,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
