/**
 * The multi-host topology of the deployment page, built from network namespaces: a store host (`agl serve --proxy`,
 * TLS, a token file of every scope), two runner hosts (an `agl run` pool each, with a runner's token) and a trainer
 * host (the local trainer on the demo task, with a trainer's token, its policy server over TLS on a direct link to the
 * store host). Used by `test/faults/multi-host.test.ts` and `bench/multi-host/run.ts`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLan, type Lan, type LanHost, type LanLink } from "./lan.js";
import { type RunnerProcess, startRunnerProcess } from "./runner-process.js";
import { type ServerProcess, startServerProcess } from "./server-process.js";
import { createTestCa } from "./test-ca.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const python = join(repoRoot, "python-bridge/.venv/bin/python");

export const TOPOLOGY_TOKENS = { runner: "runner-tok", trainer: "trainer-tok", reader: "reader-tok", admin: "admin-tok" };

export interface TopologyOptions {
  /** Working directory: certificates, the token file, the trainer's checkpoints (`ckpt/`). */
  dir: string;
  steps: number;
  tasksPerStep: number;
  n: number;
  seed?: number;
  /** The store URL the trainer dials, given the store's (a delaying relay in between, for the latency bench). */
  trainerStoreUrl?: (storeUrl: string, lan: Lan) => Promise<string>;
  /** The trainer's Python arguments and environment (default: the local trainer, {@link localTrainer}). */
  trainer?: (context: TrainerContext) => { args: string[]; env?: NodeJS.ProcessEnv };
}

/** What a trainer on the trainer host is given. */
export interface TrainerContext {
  options: TopologyOptions;
  /** The store as the trainer dials it, and the proxy's OpenAI base URL. */
  storeUrl: string;
  proxyUrl: string;
  token: string;
  caFile: string;
  /** The trainer host's address on its direct link to the store host's proxy: where its engines listen. */
  engineAddress: string;
  /** A certificate for that address. */
  engineCert: { cert: string; key: string };
  checkpointDir: string;
}

/** The local trainer (`python -m agl_bridge.local`) on the demo task, its policy server over TLS on the engine link. */
export function localTrainer(c: TrainerContext): { args: string[]; env?: NodeJS.ProcessEnv } {
  const o = c.options;
  const args = ["-m", "agl_bridge.local", "--store", c.storeUrl, "--token", c.token, "--ca-file", c.caFile, "--proxy", c.proxyUrl];
  args.push("--host", c.engineAddress, "--tls-cert", c.engineCert.cert, "--tls-key", c.engineCert.key);
  args.push("--steps", String(o.steps), "--tasks-per-step", String(o.tasksPerStep), "--n", String(o.n));
  args.push("--lr", "7e-4", "--seed", String(o.seed ?? 0), "--checkpoint-dir", c.checkpointDir, "--rollout-timeout", "120");
  return { args };
}

/** The trainer process and what it printed. */
export interface TrainerProcess {
  child: ChildProcess;
  log(): string;
  exited: Promise<number | null>;
  /** Rewards of the steps logged so far. */
  rewards(): number[];
}

export interface Topology {
  lan: Lan;
  hosts: { store: LanHost; runnerA: LanHost; runnerB: LanHost; trainer: LanHost };
  /** The direct link between the store host's proxy and the trainer's engine. */
  engineLink: LanLink;
  storeUrl: string;
  caFile: string;
  checkpointDir: string;
  server: ServerProcess;
  runners: RunnerProcess[];
  trainer: TrainerProcess;
  /** Everyone's recent output, for failure messages. */
  logs(): string;
  close(): Promise<void>;
}

/** Builds the network and starts every part; throws with the reason when namespaces cannot be made. */
export async function startTopology(options: TopologyOptions): Promise<Topology> {
  let lan: Lan;
  try {
    lan = createLan(["store", "runner-a", "runner-b", "trainer"]);
  } catch (error) {
    throw new Error(
      `the topology builds its hosts as network namespaces, which needs root and iproute2 (scripts/netns.sh): ${(error as Error).message}`,
    );
  }
  const host = (name: string) => lan.hosts[name] as LanHost;
  const hosts = { store: host("store"), runnerA: host("runner-a"), runnerB: host("runner-b"), trainer: host("trainer") };
  const started: { server?: ServerProcess; runners: RunnerProcess[]; trainer?: TrainerProcess } = { runners: [] };
  const close = async () => {
    started.trainer?.child.kill("SIGKILL");
    for (const runner of started.runners) if (runner.child.exitCode === null) runner.child.kill("SIGKILL");
    await Promise.all([...started.runners.map((r) => r.exited), started.trainer?.exited]);
    await started.server?.kill();
    lan.delete();
  };
  try {
    const engine = lan.pair("store", "trainer");
    const ca = createTestCa(options.dir);
    const storeCert = ca.server("store", `IP:${hosts.store.address},IP:${lan.observerAddress}`);
    const policyCert = ca.server("policy", `IP:${engine.bAddress}`);
    const tokenFile = join(options.dir, "tokens.txt");
    writeFileSync(
      tokenFile,
      Object.entries(TOPOLOGY_TOKENS)
        .map(([scope, token]) => `${scope}:${token}`)
        .join("\n"),
    );

    // The store host: the store and the LLM proxy on one port; the proxy verifies the engine against the CA.
    const tls = ["--tls-cert", storeCert.cert, "--tls-key", storeCert.key, "--proxy-ca-file", ca.caFile];
    const serveArgs = ["--memory", "--proxy", "--no-ui", "--host", hosts.store.address, "--token-file", tokenFile, ...tls];
    started.server = await startServerProcess(serveArgs, { prefix: hosts.store.exec });
    const storeUrl = started.server.url;

    // Two runner hosts, each its own pool; the agents call the proxy with the runner's token.
    for (const [name, runnerHost] of [
      ["runner-a", hosts.runnerA],
      ["runner-b", hosts.runnerB],
    ] as const) {
      const args = ["examples/rl-kind/agent.ts", "--store", storeUrl, "--token", TOPOLOGY_TOKENS.runner, "--ca-file", ca.caFile];
      args.push("--workers", "1", "--concurrency", "32", "--worker-id", name, "--keepalive", "2", "--poll-wait", "1");
      started.runners.push(await startRunnerProcess(args, {}, runnerHost.exec));
    }

    // The trainer host: the trainer, its engines on the engine link over TLS.
    const checkpointDir = join(options.dir, "ckpt");
    const trainerStore = options.trainerStoreUrl ? await options.trainerStoreUrl(storeUrl, lan) : storeUrl;
    const { args, env } = (options.trainer ?? localTrainer)({
      options,
      storeUrl: trainerStore,
      proxyUrl: `${storeUrl}/v1`,
      token: TOPOLOGY_TOKENS.trainer,
      caFile: ca.caFile,
      engineAddress: engine.bAddress,
      engineCert: policyCert,
      checkpointDir,
    });
    const [command, ...commandArgs] = [...hosts.trainer.exec, python, ...args];
    const child = spawn(command as string, commandArgs, {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, AGL_TOKEN: "", ...env },
    });
    let log = "";
    child.stdout?.on("data", (c: Buffer) => (log += c.toString()));
    child.stderr?.on("data", (c: Buffer) => (log += c.toString()));
    const trainer: TrainerProcess = {
      child,
      log: () => log,
      exited: once(child, "exit").then(([code]) => code as number | null),
      rewards: () => [...log.matchAll(/\[agl\] step \d+\/\d+ {2}reward ([\d.]+)/g)].map((m) => Number(m[1])),
    };
    started.trainer = trainer;
    const server = started.server;
    return {
      lan,
      hosts,
      engineLink: engine.link,
      storeUrl,
      caFile: ca.caFile,
      checkpointDir,
      server,
      runners: started.runners,
      trainer,
      logs: () =>
        [`--- trainer\n${log.slice(-6000)}`, ...started.runners.map((r, i) => `--- runner ${i}\n${r.stderr().slice(-2000)}`)].join("\n") +
        `\n--- store\n${server.stderr().slice(-3000)}`,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
