/**
 * Where a proxied call's time goes, process by process: the client (this script), the proxy (`agl serve
 * --proxy-backend`, or the standalone `agl proxy` + `agl serve`), the bare forwarder and the loopback engine each stamp
 * their part of every call on the one monotonic clock of the machine (bench/proxy/timeline-probe.mjs, preloaded:
 * Node's and undici's diagnostics channels). Sequential calls in turns of `--block` per row, as bench/proxy/run.ts
 * makes them; prints each segment's median per row: the client's request to the first handler, the handler to the
 * engine's request written, that to the engine's handler, the engine's own work, back to the forwarder's headers, to
 * the answer's headers at the client, to its end there, and the client's turn to its next call.
 *
 *   npx tsx bench/proxy/timeline.ts --compiled [--requests 2000] [--mode serve|standalone] [--stream]
 *
 * A scoped call's span is stored after its answer, in no segment of its own: it shows as the wait of the next call
 * (the client's request to the proxy's handler takes longer than for an unattributed call).
 */
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createStoreClient } from "../../src/client/store-client.js";
import { type ServerProcess, startServerProcess } from "../../test/support/server-process.js";
import { median } from "../stats.js";
import { chatBodies, type ClientStamps, createPoster } from "./calls.js";
import { startListening } from "./start-listening.js";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "2000" },
    warmup: { type: "string", default: "500" },
    block: { type: "string", default: "50" },
    mode: { type: "string", default: "serve" },
    stream: { type: "boolean", default: false },
    compiled: { type: "boolean", default: false },
  },
});
const requests = Number(args.requests);
const warmup = Number(args.warmup);
const block = Number(args.block);
if (args.mode !== "serve" && args.mode !== "standalone") throw new Error("--mode is serve or standalone");

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agl-bench-timeline-"));
const probe = `--import=${new URL("./timeline-probe.mjs", import.meta.url).href}`;
const outOf = (name: string) => join(dir, `${name}.json`);
const probed = (name: string) => ({ ...process.env, AGL_BENCH_TIMELINE_OUT: outOf(name) });

type Stamps = { arrived: number[]; answered: number[]; sent: number[]; headers: number[] };
const readStamps = (name: string): Stamps => JSON.parse(readFileSync(outOf(name), "utf8"));
const poster = createPoster();

const engine = await startListening(process.execPath, [probe, "--import", "tsx", "bench/proxy/engine.ts"], {
  cwd: repoRoot,
  env: probed("engine"),
});
const children: { name: string; stop(): Promise<unknown> }[] = [{ name: "engine", stop: () => stopChild(engine.child) }];
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

type Row = { name: string; url: string; body: string; via: string | undefined };
const calls: (ClientStamps & { row: Row; measured: boolean })[] = [];
try {
  const bare = await startListening(process.execPath, [probe, "--import", "tsx", "bench/proxy/bare-forwarder.ts"], {
    cwd: repoRoot,
    env: { ...probed("bare"), ENGINE_URL: engine.url },
  });
  children.push({ name: "bare", stop: () => stopChild(bare.child) });
  const server: ServerProcess = await startServerProcess(
    args.mode === "serve" ? ["--memory", "--proxy-backend", engine.url, "--proxy-model", "fake-model"] : ["--memory"],
    { compiled: args.compiled, nodeArgs: [probe], env: probed("serve") },
  );
  children.push({ name: "serve", stop: () => server.stop() });
  let proxyUrl = server.url;
  let proxyName = "serve";
  if (args.mode === "standalone") {
    const proxy = await startServerProcess(["--store", server.url, "--backend", engine.url, "--model", "fake-model"], {
      compiled: args.compiled,
      nodeArgs: [probe],
      env: probed("proxy"),
      command: "proxy",
    });
    children.push({ name: "proxy", stop: () => proxy.stop() });
    proxyUrl = proxy.url;
    proxyName = "proxy";
  }
  const store = createStoreClient({ baseUrl: server.url });
  await store.enqueueRollouts({ rollouts: [{}] });
  const [rollout] = (await store.dequeueRollouts({ workerId: "bench" })).rollouts;
  store.close();
  const scoped = `${proxyUrl}/rollout/${rollout?.rolloutId}/attempt/${rollout?.latestAttempt?.attemptId}/v1`;
  const { client: clientBody, engine: engineBody } = chatBodies(args.stream);
  const rows: Row[] = [
    { name: "direct", url: `${engine.url}/chat/completions`, body: engineBody, via: undefined },
    { name: "bare forwarder", url: `${bare.url}/chat/completions`, body: engineBody, via: "bare" },
    { name: "proxy, scoped", url: `${scoped}/chat/completions`, body: clientBody, via: proxyName },
    { name: "proxy, unattributed", url: `${proxyUrl}/v1/chat/completions`, body: clientBody, via: proxyName },
  ];
  for (const row of rows) {
    for (let i = 0; i < warmup; i++) calls.push({ row, ...(await poster.post(row.url, row.body)), measured: false });
  }
  for (let done = 0; done < requests; done += block) {
    for (const row of rows) {
      for (let k = 0; k < Math.min(block, requests - done); k++)
        calls.push({ row, ...(await poster.post(row.url, row.body)), measured: true });
    }
  }
} finally {
  for (const child of [...children].reverse()) await child.stop();
  poster.close();
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
}

// Every call went through the engine, and through its forwarder if any, one at a time: the k-th stamp of a kind in a
// process is that process's k-th call.
const stamps = new Map(children.map(({ name }) => [name, readStamps(name)]));
const seen = new Map<string, number>();
const segments = new Map<string, Map<string, number[]>>();
const add = (row: string, segment: string, us: number) => {
  const bySegment = segments.get(row) ?? new Map<string, number[]>();
  segments.set(row, bySegment);
  const values = bySegment.get(segment) ?? [];
  bySegment.set(segment, values);
  values.push(us);
};
for (const [i, call] of calls.entries()) {
  const at = (name: string) => {
    const k = seen.get(name) ?? 0;
    seen.set(name, k + 1);
    const s = stamps.get(name) as Stamps;
    return { arrived: s.arrived[k] as number, answered: s.answered[k] as number, sent: s.sent[k], headers: s.headers[k] };
  };
  const e = at("engine");
  const f = call.row.via ? at(call.row.via) : undefined;
  if (!call.measured) continue;
  const name = call.row.name;
  const front = f ?? e;
  add(name, "client's request → first handler", front.arrived - call.start);
  if (f) {
    add(name, "handler → engine's request written", (f.sent as number) - f.arrived);
    add(name, "written → engine's handler", e.arrived - (f.sent as number));
  }
  add(name, "the engine's work", e.answered - e.arrived);
  if (f) {
    add(name, "engine's answer → forwarder has its headers", (f.headers as number) - e.answered);
    add(name, "→ client has the answer's headers", call.headers - (f.headers as number));
  } else add(name, "engine's answer → client has its headers", call.headers - e.answered);
  add(name, "→ client has the answer's end", call.end - call.headers);
  add(name, "whole call, at the client", call.end - call.start);
  const next = calls[i + 1];
  if (next?.row === call.row) add(name, "client's turn to its next call", next.start - call.end);
  // The response's 'finish' comes once the turn that ended it is over: after a scoped call's span is built.
  if (f) add(name, "forwarder's headers → its response's 'finish'", f.answered - (f.headers as number));
}

const names = [...segments.keys()];
const order = [
  "client's request → first handler",
  "handler → engine's request written",
  "written → engine's handler",
  "the engine's work",
  "engine's answer → forwarder has its headers",
  "→ client has the answer's headers",
  "engine's answer → client has its headers",
  "→ client has the answer's end",
  "whole call, at the client",
  "client's turn to its next call",
  "forwarder's headers → its response's 'finish'",
];
console.log(
  `${requests} sequential ${args.stream ? "streamed" : "whole"} calls per row (after ${warmup}), in turns of ${block}; ` +
    `${args.mode === "serve" ? "agl serve --proxy-backend" : "agl proxy + agl serve"}, ${args.compiled ? "compiled" : "tsx"}; ` +
    "medians in µs",
);
console.log(`${"segment".padEnd(46)}${names.map((n) => n.padStart(22)).join("")}`);
for (const segment of order) {
  const cells = names.map((n) => {
    const xs = segments.get(n)?.get(segment);
    return (xs ? median(xs).toFixed(0) : "").padStart(22);
  });
  console.log(`${segment.padEnd(46)}${cells.join("")}`);
}
