// Entry of pool worker threads when agl runs from its TypeScript sources (tsx, vitest): Node 20 does not hand a
// parent's loader hooks to worker threads, so register tsx here before loading the worker module. Built installs
// point the pool at dist/runner/pool-entry.js instead. The top-level await, as there, keeps piscina from require()-ing it.
import { register } from "tsx/esm/api";

register();
globalThis.__aglTsxRegistered = true;
const worker = await import("./pool-worker.ts");
export default worker.default;
export const ping = worker.ping;
