/**
 * Across machines: a store host (`agl serve` with the LLM proxy), two runner hosts (an `agl run` pool each) and a
 * trainer host (the local trainer and its policy server), each a network namespace with its own address on one
 * switch, plus a direct link between the store host's proxy and the trainer's engine. Everything talks TLS (a CA the
 * test makes) with scoped tokens. The demo task trains to the demo's target while each link — runner ↔ store,
 * trainer ↔ store, proxy ↔ engine — is cut once for a few seconds and restored. Afterwards: every rollout succeeded
 * and was trained exactly once, every step trained all its groups, every rollout's spans are all there once (its LLM
 * call with token ids and its reward), the triplet stream resumed from its cursor, and the cut runner reconnected and
 * kept claiming by itself.
 *
 * Needs root (network namespaces): it fails, never skips, where they cannot be made.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { RolloutMode, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createTripletClient } from "../../src/triplets/triplet-client.js";
import { createLan, type Lan } from "../support/lan.js";
import { type RunnerProcess, startRunnerProcess } from "../support/runner-process.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { createTestCa } from "../support/test-ca.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const python = join(repoRoot, "python-bridge/.venv/bin/python");
const STEPS = 100;
const TASKS = 8;
const N = 8;
const CUT_MS = 5_000;
const tokens = { runner: "runner-tok", trainer: "trainer-tok", reader: "reader-tok", admin: "admin-tok" };

let lan: Lan | undefined;
let dir = "";
let server: ServerProcess | undefined;
let trainer: ChildProcess | undefined;
let client: StoreClient | undefined;
const runners: RunnerProcess[] = [];
let trainerLog = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-multi-host-"));
  try {
    lan = createLan(["store", "runner-a", "runner-b", "trainer"]);
  } catch (error) {
    throw new Error(
      `the multi-host test builds its hosts as network namespaces, which needs root and iproute2 (scripts/netns.sh): ${(error as Error).message}`,
    );
  }
});
afterAll(async () => {
  trainer?.kill("SIGKILL");
  for (const runner of runners) if (runner.child.exitCode === null) runner.child.kill("SIGKILL");
  await Promise.all(runners.map((r) => r.exited));
  client?.close();
  await server?.kill();
  lan?.delete();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const stepsLogged = () => [...trainerLog.matchAll(/\[agl\] step (\d+)\/\d+ {2}reward/g)].map((m) => Number(m[1]));
const lastStep = () => Math.max(0, ...stepsLogged());
const logs = () =>
  [`--- trainer\n${trainerLog.slice(-6000)}`, ...runners.map((r, i) => `--- runner ${i}\n${r.stderr().slice(-2000)}`)].join("\n") +
  `\n--- store\n${server?.stderr().slice(-3000) ?? ""}`;

async function untilStep(step: number, timeoutMs: number): Promise<void> {
  for (const giveUp = Date.now() + timeoutMs; lastStep() < step; await sleep(200)) {
    if (Date.now() > giveUp) throw new Error(`the trainer did not reach step ${step} in ${timeoutMs} ms\n${logs()}`);
    if (trainer?.exitCode !== null) throw new Error(`the trainer exited with ${trainer?.exitCode}\n${logs()}`);
  }
}

describe("multi-host topology over TLS with scoped tokens, each link cut once", () => {
  it("trains the demo task to its target and loses or repeats nothing", async () => {
    const net = lan!;
    const host = (name: string) => {
      const found = net.hosts[name];
      if (!found) throw new Error(`no host ${name}`);
      return found;
    };
    const [storeHost, trainerHost] = [host("store"), host("trainer")];
    const engineLink = net.pair("store", "trainer");
    const ca = createTestCa(dir);
    const storeCert = ca.server("store", `IP:${storeHost.address}`);
    const policyCert = ca.server("policy", `IP:${engineLink.bAddress}`);
    const tokenFile = join(dir, "tokens.txt");
    writeFileSync(
      tokenFile,
      Object.entries(tokens)
        .map(([scope, token]) => `${scope}:${token}`)
        .join("\n"),
    );

    // The store host: the store, the LLM proxy on the same port (verifying the trainer's engine against the CA).
    server = await startServerProcess(
      [
        "--memory",
        "--proxy",
        "--no-ui",
        "--host",
        storeHost.address,
        "--token-file",
        tokenFile,
        "--tls-cert",
        storeCert.cert,
        "--tls-key",
        storeCert.key,
        "--proxy-ca-file",
        ca.caFile,
      ],
      { prefix: storeHost.exec },
    );
    const storeUrl = server.url;
    expect(storeUrl).toMatch(/^https:\/\//);

    // Two runner hosts, each its own pool, with a runner's token; the agents call the proxy with it.
    for (const name of ["runner-a", "runner-b"]) {
      const runnerHost = host(name);
      const args = ["examples/rl-kind/agent.ts", "--store", storeUrl, "--token", tokens.runner, "--ca-file", ca.caFile];
      args.push("--workers", "1", "--concurrency", "32", "--worker-id", name, "--keepalive", "2", "--poll-wait", "1");
      runners.push(await startRunnerProcess(args, {}, runnerHost.exec));
    }

    // The trainer host: the local trainer with a trainer's token, its policy server on the engine link over TLS.
    const summary = join(dir, "summary.json");
    const ckpt = join(dir, "ckpt");
    const trainerArgs = ["-m", "agl_bridge.local", "--store", storeUrl, "--token", tokens.trainer, "--ca-file", ca.caFile];
    trainerArgs.push(
      "--proxy",
      `${storeUrl}/v1`,
      "--host",
      engineLink.bAddress,
      "--tls-cert",
      policyCert.cert,
      "--tls-key",
      policyCert.key,
    );
    trainerArgs.push("--steps", String(STEPS), "--tasks-per-step", String(TASKS), "--n", String(N), "--lr", "1e-3", "--seed", "0");
    trainerArgs.push("--checkpoint-dir", ckpt, "--summary", summary, "--rollout-timeout", "120");
    const [command, ...args] = [...trainerHost.exec, python, ...trainerArgs];
    trainer = spawn(command as string, args, { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, AGL_TOKEN: "" } });
    trainer.stdout?.on("data", (c: Buffer) => (trainerLog += c.toString()));
    trainer.stderr?.on("data", (c: Buffer) => (trainerLog += c.toString()));
    const trainerExit = new Promise<number | null>((resolve) => trainer?.once("exit", (code) => resolve(code)));

    // One cut per link, a few steps apart, each while the trainer is training.
    const cuts: { link: string; from: number; to: number }[] = [];
    const cut = async (name: string, link: { cut(): void; restore(): void }, atStep: number) => {
      await untilStep(atStep, 150_000);
      await sleep(300);
      const from = Date.now();
      link.cut();
      await sleep(CUT_MS);
      link.restore();
      cuts.push({ link: name, from, to: Date.now() });
    };
    await cut("runner-a <-> store", host("runner-a").link, 8);
    await cut("trainer <-> store", trainerHost.link, 20);
    await cut("proxy <-> engine", engineLink.link, 32);

    const code = await Promise.race([trainerExit, sleep(240_000).then(() => "timeout")]);
    expect(code, logs()).toBe(0);

    // Learning: the demo's rule (final mean of the last 5 steps >= 0.9).
    const result = JSON.parse(readFileSync(summary, "utf8")) as { rewards: number[]; final_reward: number };
    expect(result.rewards.length).toBe(STEPS);
    expect(result.final_reward, logs()).toBeGreaterThanOrEqual(0.9);

    // Every step once; every step trained all its groups; no rollout trained twice.
    const history = readFileSync(join(ckpt, "history.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { step: number; rollout_ids: string[]; n_rollouts: number });
    expect(history.map((h) => h.step)).toEqual([...Array(STEPS).keys()]);
    for (const h of history) expect(h.rollout_ids.length, `step ${h.step}`).toBe(TASKS * N);
    const trained = history.flatMap((h) => h.rollout_ids);
    expect(new Set(trained).size).toBe(trained.length);

    // What the store holds (read as an observer with the reader's token): every training rollout succeeded once and
    // was trained; each has exactly one LLM call with token ids and its reward, once.
    client = createStoreClient({ baseUrl: storeUrl, token: tokens.reader, caFile: ca.caFile });
    const { rollouts } = await client.queryRollouts({ modeIn: [RolloutMode.TRAIN] });
    expect(rollouts.length).toBe(trained.length);
    expect(rollouts.filter((r) => r.status !== RolloutStatus.SUCCEEDED).map((r) => r.rolloutId)).toEqual([]);
    expect(new Set(rollouts.map((r) => r.rolloutId))).toEqual(new Set(trained));
    const triplets = createTripletClient({ baseUrl: storeUrl, token: tokens.reader, tls: { ca: readFileSync(ca.caFile) } });
    try {
      for (const rolloutId of trained) {
        const { triplets: t } = await triplets.getRolloutTriplets({ rolloutId });
        expect(t.length, rolloutId).toBe(1);
        expect(t[0]?.promptTokenIds.length, rolloutId).toBeGreaterThan(0);
        expect(t[0]?.responseTokenIds.length, rolloutId).toBeGreaterThan(0);
        expect(t[0]?.reward, rolloutId).toBeDefined();
        const { spans } = await client.querySpans({ rolloutId });
        expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
      }
    } finally {
      triplets.close();
    }

    // The runner whose link was cut reconnected by itself and went on claiming after the cut.
    const runnerCut = cuts[0]!;
    const { attempts } = await client.queryAttempts({});
    const afterCut = attempts.filter((a) => a.workerId === "runner-a" && (a.startTime ?? 0) * 1000 > runnerCut.to + 1_000);
    expect(afterCut.length, logs()).toBeGreaterThan(0);
    // The trainer's stream of triplets broke during its cut, or carried on over the same connection: either way
    // nothing was lost (above); when it broke, it was resumed from its cursor.
    const resumed = (trainerLog.match(/resuming from its cursor/g) ?? []).length;
    process.stderr.write(`multi-host: cuts ${JSON.stringify(cuts.map((c) => c.link))}, triplet stream resumed ${resumed}x\n`);
    for (const runner of runners) runner.child.kill("SIGTERM");
    expect(await Promise.all(runners.map((r) => r.exited))).toEqual([0, 0]);
  }, 420_000);
});
