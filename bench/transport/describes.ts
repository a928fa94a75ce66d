/**
 * What the store server spends on the LLM proxy's question about an attempt (`describe_attempt`, with the first call's
 * span promise), asked as `agl proxy` asks it: on its span stream (`createSpanStream`), in waves of `--wave` attempts
 * whose first calls start together, as a runner pool starts its rollouts. Two ways, in turns, against one SQLite
 * `agl serve` (compiled: `make build` first):
 * - `alone`: each question a message of its own (the proxy until the questions of one turn were gathered);
 * - `gathered`: the wave's questions in one message (`AddSpans.expect`), read in one transaction.
 * Prints the server's CPU (user + system, from /proc) a question and each wave's round trip.
 *
 *   npx tsx bench/transport/describes.ts [--attempts 6400] [--wave 32] [--rounds 3] [--only alone|gathered]
 *   npx tsx bench/transport/describes.ts --profile DIR    # the server's V8 CPU profile, written when it stops
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { silentLogger } from "../../src/core/logger.js";
import { createSpanStream } from "../../src/proxy/span-stream.js";
import { startServerProcess } from "../../test/support/server-process.js";
import { processCpuSeconds } from "../stats.js";

const { values: args } = parseArgs({
  options: {
    attempts: { type: "string", default: "6400" },
    wave: { type: "string", default: "32" },
    rounds: { type: "string", default: "3" },
    only: { type: "string" },
    profile: { type: "string" },
  },
});
const wave = Number(args.wave);
/** Questions a run: whole waves. */
const attempts = Math.ceil(Number(args.attempts) / wave) * wave;

const dir = mkdtempSync(join(tmpdir(), "agl-bench-describes-"));
const nodeArgs = args.profile ? ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${resolve(args.profile)}`] : [];
const server = await startServerProcess(["--database", join(dir, "agl.db")], { compiled: true, nodeArgs });
const client = createStoreClient({ baseUrl: server.url });
const stream = createSpanStream(client, silentLogger);
try {
  // Every question of the run is about a claimed attempt of its own, as an attempt's first call is.
  const scopes: { rolloutId: string; attemptId: string }[] = [];
  const rounds = Number(args.rounds);
  const total = attempts * rounds * (args.only === undefined ? 2 : 1) + wave * 20;
  for (let made = 0; made < total; made += 5000) {
    await client.enqueueRollouts({ rollouts: Array.from({ length: Math.min(5000, total - made) }, () => ({})) });
  }
  while (scopes.length < total) {
    const { rollouts } = await client.dequeueRollouts({ workerId: "w", limit: 500 });
    for (const r of rollouts) scopes.push({ rolloutId: r.rolloutId, attemptId: r.latestAttempt?.attemptId ?? "" });
  }
  let next = 0;
  const question = (i: number) => {
    const scope = scopes[next++] as (typeof scopes)[number];
    return { ...scope, spanIds: [`s${i.toString(16).padStart(15, "0")}`], describeAttempt: true };
  };
  const ask = {
    alone: () => Promise.all(Array.from({ length: wave }, (_, i) => stream.addSpans({ spans: [], expect: [question(i)] }))),
    gathered: () => stream.addSpans({ spans: [], expect: Array.from({ length: wave }, (_, i) => question(i)) }),
  };
  const run = async (how: keyof typeof ask, count: number) => {
    const before = processCpuSeconds(server.pid);
    const times: number[] = [];
    for (let asked = 0; asked < count; asked += wave) {
      const started = performance.now();
      await ask[how]();
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return { cpuUs: ((processCpuSeconds(server.pid) - before) / count) * 1e6, p50: times[times.length >> 1] ?? 0 };
  };
  await run("alone", wave * 10);
  await run("gathered", wave * 10);
  console.log(`${attempts} questions a run, in waves of ${wave}; SQLite store server (compiled)`);
  for (let round = 0; round < rounds; round++) {
    const order: (keyof typeof ask)[] = round % 2 === 0 ? ["alone", "gathered"] : ["gathered", "alone"];
    for (const how of order.filter((how) => args.only === undefined || how === args.only)) {
      const { cpuUs, p50 } = await run(how, attempts);
      console.log(
        `${how.padEnd(8)} server CPU ${cpuUs.toFixed(1).padStart(6)} µs a question; a wave's round trip p50 ${p50.toFixed(2)} ms`,
      );
    }
  }
} finally {
  stream.close();
  client.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
