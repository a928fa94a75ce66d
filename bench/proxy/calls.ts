/**
 * What the proxy benches send and how: one conversation (~800 prompt tokens), its bodies for the proxy and for the
 * engine (with what the proxy adds to each call), and sequential POSTs on one kept-alive connection a URL.
 */
import * as http from "node:http";

export const messages = [
  { role: "system", content: "You are a helpful assistant. ".repeat(20) },
  { role: "user", content: "Tell me about foxes. ".repeat(10) },
];

/** The chat call as a client sends it to the proxy, and as the proxy sends it on (so a direct call costs the same). */
export const chatBodies = (stream: boolean) => ({
  client: JSON.stringify({ model: "fake-model", messages, stream }),
  engine: JSON.stringify({ model: "fake-model", messages, stream, return_token_ids: true, logprobs: true }),
});

/** A call as the client saw it, in µs on CLOCK_MONOTONIC (the clock every process of a Linux machine shares). */
export interface ClientStamps {
  start: number;
  /** The answer's headers in. */
  headers: number;
  /** The answer's end in. */
  end: number;
}

/** Microseconds on CLOCK_MONOTONIC. */
export const nowUs = () => Number(process.hrtime.bigint()) / 1000;

/** POSTs JSON one call at a time (one kept-alive connection an origin) and reads each whole answer. */
export function createPoster(): { post(url: string, body: string): Promise<ClientStamps>; close(): void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return {
    post: (url, body) =>
      new Promise((resolve, reject) => {
        const start = nowUs();
        const req = http.request(
          url,
          { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
          (res) => {
            const headers = nowUs();
            if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode}`));
            res.on("data", () => {});
            res.on("end", () => resolve({ start, headers, end: nowUs() }));
          },
        );
        req.on("error", reject);
        req.end(body);
      }),
    close: () => agent.destroy(),
  };
}
