/**
 * What a small unary call costs agl's TypeScript store client (`createStoreClient`: its calls ride one `CallStream`),
 * the side `bench/transport/run.ts` leaves out: sequential `GetRollout`s against a compiled `agl serve --memory` in a
 * process of its own. Prints the client process's CPU a call and the round trip. With `--compare DIR` it runs this
 * checkout's compiled client and server and DIR's (say the previous main, built) in ABBA order, each run in a fresh
 * process.
 *
 *   npx tsx bench/transport/client.ts [--calls 15000] [--warmup 3000] [--compare DIR] [--rounds 2]
 */
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { startServerProcess } from "../../test/support/server-process.js";
import { inTurns, printSummary, runInChild } from "../checkouts-in-turns.js";

const { values: args } = parseArgs({
  options: {
    calls: { type: "string", default: "15000" },
    warmup: { type: "string", default: "3000" },
    compare: { type: "string" },
    rounds: { type: "string", default: "2" },
    root: { type: "string" },
  },
});
const here = resolve(fileURLToPath(new URL("../..", import.meta.url)));

interface Result {
  cpuUs: number;
  roundTripUs: number;
}

if (args.root !== undefined) {
  process.stdout.write(`${JSON.stringify(await measure(resolve(args.root)))}\n`);
  process.exit(0);
}
const roots = args.compare === undefined ? [here] : [here, resolve(args.compare)];
console.log(`${args.calls} sequential GetRollout calls through agl's store client, after ${args.warmup}`);
const run = (root: string) => {
  const result = runInChild<Result>(
    import.meta.url,
    ["--root", root, "--calls", String(args.calls), "--warmup", String(args.warmup)],
    here,
  );
  console.log(`${root}: client CPU ${result.cpuUs.toFixed(1)} µs a call, round trip ${result.roundTripUs.toFixed(1)} µs`);
  return result;
};
printSummary(
  inTurns(roots, Number(args.rounds), run, (result) => result.cpuUs),
  "client CPU a call",
  "µs",
  1,
);

/** Runs the calls with the compiled client of the checkout at `root` against its compiled server. */
async function measure(root: string): Promise<Result> {
  const { createStoreClient } = await import(pathToFileURL(`${root}/dist/index.js`).href);
  const server = await startServerProcess(["--memory"], { compiled: true, root });
  const client = createStoreClient({ baseUrl: server.url });
  try {
    const { rollouts } = await client.enqueueRollouts({ rollouts: [{}] });
    const rolloutId = rollouts[0].rolloutId as string;
    for (let i = 0; i < Number(args.warmup); i++) await client.getRollout({ rolloutId });
    const n = Number(args.calls);
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < n; i++) await client.getRollout({ rolloutId });
    const used = process.cpuUsage(cpu);
    return { cpuUs: (used.user + used.system) / n, roundTripUs: ((performance.now() - started) * 1000) / n };
  } finally {
    client.close();
    await server.stop();
  }
}
