import * as http from "node:http";
import * as https from "node:https";
import type { ClientTls } from "../core/tls.js";

/** Why an upstream try failed without an HTTP answer. */
export class UpstreamError extends Error {
  override readonly name = "UpstreamError";
  constructor(
    message: string,
    /** `connect` (refused, reset, DNS), `timeout` (no response headers in time), `aborted` (the client left). */
    readonly kind: "connect" | "timeout" | "aborted",
  ) {
    super(message);
  }
}

/** Options of {@link createUpstream}. */
export interface UpstreamOptions {
  /** Longest wait for an engine's response headers (default 600,000 ms: a long non-streamed generation). */
  headersTimeoutMs?: number;
  /** Longest silence between two body chunks once the answer started (default 300,000 ms). */
  idleTimeoutMs?: number;
  /** For https engines: the CA to verify them against, and a client certificate for mutual TLS. */
  tls?: ClientTls;
}

/** Sends requests to engines over kept-alive connections. */
export interface Upstream {
  /** POSTs `body` (JSON) and resolves with the response once its headers arrived; rejects with {@link UpstreamError}. */
  post(url: URL, body: Buffer, apiKey: string | undefined, signal: AbortSignal): Promise<http.IncomingMessage>;
  close(): void;
}

/** Kept-alive connections found closed, one after another, before a request is given up (the pool's stale ones). */
const MAX_STALE_SOCKETS = 8;

/** The error of a request on a connection the engine had closed: reset, or written to after the close. */
const closedUnread = (error: NodeJS.ErrnoException) => error.code === "ECONNRESET" || error.code === "EPIPE";

/** Creates an {@link Upstream} with its own keep-alive agents. */
export function createUpstream(options: UpstreamOptions = {}): Upstream {
  const headersTimeoutMs = options.headersTimeoutMs ?? 600_000;
  const idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
  const agents = {
    http: new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY, scheduling: "lifo" }),
    https: new https.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY, scheduling: "lifo", ...options.tls }),
  };
  return {
    post(url, body, apiKey, signal) {
      return new Promise((resolve, reject) => {
        if (signal.aborted) return reject(new UpstreamError("the client went away", "aborted"));
        const secure = url.protocol === "https:";
        const headers: http.OutgoingHttpHeaders = {
          "content-type": "application/json",
          "content-length": body.length,
          accept: "application/json, text/event-stream",
        };
        if (apiKey) headers.authorization = `Bearer ${apiKey}`;
        let req: http.ClientRequest;
        let settled = false;
        const fail = (error: UpstreamError) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          req.destroy();
          reject(error);
        };
        const timer = setTimeout(
          () => fail(new UpstreamError(`no response from ${url.origin} within ${headersTimeoutMs} ms`, "timeout")),
          headersTimeoutMs,
        );
        const onAbort = () => fail(new UpstreamError("the client went away", "aborted"));
        signal.addEventListener("abort", onAbort, { once: true });
        const send = (staleSockets: number) => {
          const request = (secure ? https : http).request(url, { method: "POST", headers, agent: secure ? agents.https : agents.http });
          req = request;
          request.on("error", (error: NodeJS.ErrnoException) => {
            // An engine closes a kept-alive connection after its idle time (uvicorn's 5 s, Node's 5 s); a request
            // sent on it just then is reset unread. It is sent again, on the next pooled connection or a new one.
            if (!settled && request.reusedSocket && closedUnread(error) && staleSockets < MAX_STALE_SOCKETS) {
              return send(staleSockets + 1);
            }
            fail(new UpstreamError(`${url.origin}: ${error.code ?? error.message}`, "connect"));
          });
          request.on("response", (res) => {
            if (settled) return void res.destroy();
            settled = true;
            clearTimeout(timer);
            // From here the caller owns the abort; a stalled body ends by the idle timeout.
            signal.removeEventListener("abort", onAbort);
            res.setTimeout(idleTimeoutMs, () => res.destroy(new Error(`${url.origin} stalled for ${idleTimeoutMs} ms`)));
            resolve(res);
          });
          request.end(body);
        };
        send(0);
      });
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** Reads a whole response body. */
export async function readBody(res: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Statuses worth another try: rate limited or the engine failing. */
export const isRetryableStatus = (status: number) => status === 429 || status === 500 || status === 502 || status === 503 || status === 504;
