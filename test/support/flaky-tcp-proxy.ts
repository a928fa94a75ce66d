import { createServer, type Socket, connect } from "node:net";
import type { AddressInfo } from "node:net";

/** A TCP proxy in front of a server, with switches that break the connection the way networks do. */
export interface FlakyTcpProxy {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /**
   * The next `n` times the server starts answering, the answer is lost: the connection is cut before a byte of it
   * reaches the client (the server has already done the work). Use with HTTP/1.1 clients, whose connections carry
   * nothing else from the server.
   */
  loseNextAnswers(n?: number): void;
  /** While on, nothing is forwarded in either direction (a stalled network); connections stay open. */
  stall(on: boolean): void;
  /** Cuts every open connection, discarding what a stall held back. */
  dropConnections(): void;
  /** Answers lost so far. */
  readonly lost: number;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port forwarding to `target` (`http://host:port`). */
export async function startFlakyTcpProxy(target: string): Promise<FlakyTcpProxy> {
  const { hostname, port } = new URL(target);
  let toLose = 0;
  let lost = 0;
  let stalled = false;
  const sockets = new Set<Socket>();
  const held: (() => void)[] = [];
  const forward = (from: Socket, to: Socket, fromServer: boolean) => {
    from.on("data", (chunk) => {
      const send = () => {
        if (fromServer && toLose > 0) {
          toLose--;
          lost++;
          from.destroy();
          to.destroy();
          return;
        }
        to.write(chunk);
      };
      if (stalled) held.push(send);
      else send();
    });
    from.on("close", () => to.destroy());
    from.on("error", () => to.destroy());
  };
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    client.on("close", () => sockets.delete(client));
    upstream.on("close", () => sockets.delete(upstream));
    forward(client, upstream, false);
    forward(upstream, client, true);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    loseNextAnswers: (n = 1) => {
      toLose += n;
    },
    stall(on) {
      stalled = on;
      if (!on) for (const send of held.splice(0)) send();
    },
    dropConnections() {
      held.length = 0;
      for (const s of sockets) s.destroy();
    },
    get lost() {
      return lost;
    },
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
