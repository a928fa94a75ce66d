/**
 * Fault: the store goes down while a runner's attempts end, and the runner is told to stop before it comes back.
 * The runner (`agl run`) cannot deliver the attempts' spans and ends meanwhile. It keeps retrying them, as its retry
 * window allows, rather than exit with that work pending. (Its span retries are unref'd timers, so that a tracer
 * never holds its process open. Before the runner held its process open itself, it exited with code 13 and an
 * "unsettled top-level await" warning, losing the spans and the attempts' ends. It did so on SIGTERM here, and at
 * random during a network cut in test/faults/network-cut.test.ts.) When the store is back on the same file, it
 * delivers everything and exits 0.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { type RunnerProcess, startRunnerProcess } from "../support/runner-process.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { jsonValue, waitFinished } from "../support/store-harness.js";

const dir = mkdtempSync(join(tmpdir(), "agl-outage-"));
const database = join(dir, "agl.db");
const servers: ServerProcess[] = [];
const clients: StoreClient[] = [];
let runner: RunnerProcess | undefined;

afterAll(async () => {
  if (runner && runner.child.exitCode === null && runner.child.signalCode === null) runner.child.kill("SIGKILL");
  await runner?.exited;
  for (const client of clients) client.close();
  for (const server of servers) await server.kill();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const logs = () => (runner ? `--- runner stdout\n${runner.stdout()}--- runner stderr\n${runner.stderr()}` : "");

describe("fault: the store is down while a runner's attempts end", () => {
  it("the runner keeps their spans and ends, stops only once they are delivered, and exits 0", async () => {
    const first = await startServerProcess(["--database", database]);
    servers.push(first);
    const port = new URL(first.url).port;
    const client = createStoreClient({ baseUrl: first.url });
    clients.push(client);

    const steps = 10; // 200 ms each: the attempts end about 2 s after they start
    const ids = (
      await client.enqueueRollouts({ rollouts: Array.from({ length: 3 }, () => ({ input: jsonValue({ steps, stepMs: 200 }) })) })
    ).rollouts.map((r) => r.rolloutId);
    runner = await startRunnerProcess([
      "test/fixtures/agents.ts",
      "--export",
      "stepper",
      "--store",
      first.url,
      "--workers",
      "1",
      "--concurrency",
      "3",
      "--poll-wait",
      "0.3",
      "--shutdown-grace",
      "1",
    ]);
    const until = Date.now() + 30_000;
    while ((await client.queryRollouts({ rolloutIdIn: ids, statusIn: [RolloutStatus.RUNNING] })).rollouts.length < ids.length) {
      if (Date.now() > until) throw new Error(`the rollouts did not all start\n${logs()}`);
      await sleep(100);
    }

    // The store goes away; the agents finish meanwhile, and the runner is told to stop.
    await first.kill();
    await sleep(4_000);
    runner.child.kill("SIGTERM");
    await sleep(8_000);
    expect([runner.child.exitCode, runner.child.signalCode], logs()).toEqual([null, null]);

    // The store is back, on the same file and port: the runner delivers what it kept, then exits.
    const second = await startServerProcess(["--database", database, "--port", port]);
    servers.push(second);
    expect(second.url).toBe(first.url);
    const code = await Promise.race([runner.exited, sleep(60_000).then(() => "still running after 60 s")]);
    expect(code, logs()).toBe(0);
    expect(runner.stdout()).toMatch(/agl runner finished: \{"claimed":3,"succeeded":3,"failed":0,/);

    const again = createStoreClient({ baseUrl: second.url });
    clients.push(again);
    const finished = await waitFinished(again, ids, 10);
    expect(finished.map((r) => r.status)).toEqual(ids.map(() => RolloutStatus.SUCCEEDED));
    for (const id of ids) {
      const { attempts } = await again.queryAttempts({ rolloutId: id });
      expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.SUCCEEDED]);
      const { spans } = await again.querySpans({ rolloutId: id });
      // Every step's span, the reward annotation and the rollout's root span: none lost to the outage.
      expect(spans.length, logs()).toBe(steps + 2);
    }
  }, 120_000);
});
