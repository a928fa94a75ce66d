/**
 * The watchdog's cost with many rollouts in flight: N rollouts claimed (preparing, so active) and then left alone
 * while the server's CPU time is read for --seconds. With nothing else happening, that CPU is the watchdog's (and the
 * server's idle timers'). Under the default 30 s unresponsive limit every active rollout has a deadline.
 *
 *   npx tsx bench/store/watchdog.ts --backend sqlite --active 2000 --seconds 20 [--agl-root ../base]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { startServerProcess } from "../../test/support/server-process.js";
import { processCpuSeconds } from "../stats.js";

const { values: args } = parseArgs({
  options: {
    backend: { type: "string", default: "sqlite" },
    active: { type: "string", default: "2000" },
    seconds: { type: "string", default: "20" },
    "agl-root": { type: "string" },
  },
});
const dir = mkdtempSync(join(tmpdir(), "agl-bench-watchdog-"));
const storage = args.backend === "memory" ? ["--memory"] : ["--database", join(dir, "bench.db")];
const server = await startServerProcess(storage, { compiled: true, root: args["agl-root"] });
const client = createStoreClient({ baseUrl: server.url });
const cpuSeconds = () => processCpuSeconds(server.pid);
try {
  const active = Number(args.active);
  for (let sent = 0; sent < active; sent += 500) {
    await client.enqueueRollouts({ rollouts: Array.from({ length: Math.min(500, active - sent) }, () => ({})) });
  }
  for (let claimed = 0; claimed < active; ) claimed += (await client.dequeueRollouts({ workerId: "bench", limit: 500 })).rollouts.length;
  await new Promise((r) => setTimeout(r, 2000)); // past the calls' own work and the first full pass
  const before = cpuSeconds();
  const seconds = Number(args.seconds);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const used = cpuSeconds() - before;
  console.log(
    `backend=${args.backend} active rollouts=${active}: server CPU ${((used / seconds) * 1000).toFixed(1)} ms per second idle ` +
      `(${((used / seconds / active) * 1e6).toFixed(1)} µs per active rollout per second)`,
  );
} finally {
  client.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
