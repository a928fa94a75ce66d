/**
 * The least a proxy in Node can do, as its own process, for the proxy benchmark's floor: each POST's body sent on to
 * the engine (ENGINE_URL, its OpenAI base URL; the path after `/v1` kept) with undici, as agl's proxy sends it, and the
 * answer's bytes passed back as they arrive. No parsing, no checks, no spans: what it adds over a direct call is
 * what one more hop through Node costs on this machine. Prints its URL, runs until killed.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";

const engine = new URL(process.env.ENGINE_URL ?? "");
const agent = new Agent();

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", async () => {
    try {
      const path = engine.pathname.replace(/\/+$/, "") + (req.url ?? "").replace(/^\/v1/, "");
      const upstream = await agent.request({
        origin: engine.origin,
        path,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: Buffer.concat(chunks),
      });
      const { "content-type": type, "content-length": length } = upstream.headers;
      const headers: http.OutgoingHttpHeaders = { "content-type": String(type) };
      if (length !== undefined) headers["content-length"] = Number(length);
      res.writeHead(upstream.statusCode, headers);
      for await (const chunk of upstream.body) res.write(chunk);
      res.end();
    } catch (error) {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end(String(error));
    }
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`bare forwarder listening on http://127.0.0.1:${(server.address() as AddressInfo).port}/v1\n`);
});
process.on("SIGTERM", () => {
  server.close();
  void agent.close().then(() => process.exit(0));
});
