import type * as http from "node:http";
import type * as net from "node:net";

/** Hands connections to an `http.Server` that does not listen, and closes them when it shuts down. */
export interface HttpConnections {
  accept(socket: net.Socket): void;
  /** Closes idle keep-alive connections now, and busy ones as soon as their response is done. */
  closeIdle(): void;
}

/** Connection bookkeeping for the HTTP/1.1 side of the front server. */
export function trackHttpConnections(server: http.Server): HttpConnections {
  let closing = false;
  server.on("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    // A keep-alive connection busy at shutdown becomes idle only after its response; close it then.
    res.once("finish", () => {
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });
  return {
    accept: (socket) => server.emit("connection", socket),
    closeIdle() {
      closing = true;
      server.closeIdleConnections();
    },
  };
}
