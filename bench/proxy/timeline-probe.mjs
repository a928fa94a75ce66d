// Preloaded (`--import`) into each process of bench/proxy/timeline.ts. Stamps, on the monotonic clock that every
// process of a Linux machine shares, what this process did with each LLM call (a POST to …/completions): when the
// request reached its HTTP server's handler and when its answer there finished; and, where it forwards calls, when
// undici wrote a call's request to the engine's socket and when it had the engine's headers. Node's and undici's own
// diagnostics channels: no code of agl's is touched. Written as JSON to $AGL_BENCH_TIMELINE_OUT at exit.
// Subscribing makes undici build a little more per request (the messages): compare segments, not absolute costs.
import { subscribe } from "node:diagnostics_channel";
import { writeFileSync } from "node:fs";

const stamps = { arrived: [], answered: [], sent: [], headers: [] };
/** Microseconds on CLOCK_MONOTONIC. */
const now = () => Number(process.hrtime.bigint()) / 1000;
const isCall = (path) => /\/completions$/.test((path ?? "").split("?")[0]);

subscribe("http.server.request.start", ({ request }) => {
  if (request.method === "POST" && isCall(request.url)) stamps.arrived.push(now());
});
subscribe("http.server.response.finish", ({ request }) => {
  if (request.method === "POST" && isCall(request.url)) stamps.answered.push(now());
});
subscribe("undici:client:sendHeaders", ({ request }) => {
  if (isCall(request.path)) stamps.sent.push(now());
});
subscribe("undici:request:headers", ({ request }) => {
  if (isCall(request.path)) stamps.headers.push(now());
});
process.on("exit", () => writeFileSync(process.env.AGL_BENCH_TIMELINE_OUT, JSON.stringify(stamps)));
