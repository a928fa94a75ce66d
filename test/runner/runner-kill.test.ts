/** `agl run` as real processes: a runner killed with SIGKILL, the watchdog, and another runner finishing the work. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { type RunnerProcess, runCli, startRunnerProcess } from "../support/runner-process.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";

const agentModule = "test/fixtures/agents.ts";
let h: StoreHarness;
const processes: RunnerProcess[] = [];
beforeEach(async () => {
  h = await startStoreHarness({ watchdogSeconds: 0.2 });
});
afterEach(async () => {
  for (const p of processes.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
    await p.exited;
  }
  await h.close();
});

const waitFor = async (check: () => Promise<boolean>, ms = 20_000) => {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) {
      const { rollouts } = await h.client.queryRollouts({});
      const runners = processes.map((p) => `--- stdout\n${p.stdout()}--- stderr\n${p.stderr()}`).join("\n");
      throw new Error(`condition not met in time; rollouts: ${rollouts.map((r) => RolloutStatus[r.status]).join(", ")}\n${runners}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** A second runner (runner-b) finishes `ids`: each then has runner-a's attempt, ended `firstEnd`, and runner-b's. */
async function finishOnSecondRunner(ids: string[], args: string[], firstEnd: AttemptStatus): Promise<RunnerProcess> {
  const second = await startRunnerProcess([agentModule, ...args, "--worker-id", "runner-b", "--max-rollouts", String(ids.length)]);
  processes.push(second);
  const finished = await waitFinished(h.client, ids, 30);
  expect(finished.map((r) => r.status)).toEqual(ids.map(() => RolloutStatus.SUCCEEDED));
  for (const id of ids) {
    const { attempts } = await h.client.queryAttempts({ rolloutId: id });
    expect(attempts.map((a) => [a.status, a.workerId])).toEqual([
      [firstEnd, "runner-a"],
      [AttemptStatus.SUCCEEDED, "runner-b"],
    ]);
  }
  // With --max-rollouts the second runner exits by itself once its rollouts are reported.
  expect(await second.exited).toBe(0);
  return second;
}

describe("agl run", () => {
  it("a runner killed with SIGKILL leaves attempts the watchdog marks unresponsive; another runner completes them", async () => {
    const config = { unresponsiveSeconds: 2, maxAttempts: 2, retryCondition: [AttemptStatus.UNRESPONSIVE] };
    const { rollouts } = await h.client.enqueueRollouts({ rollouts: Array.from({ length: 3 }, () => ({ input: jsonValue({}), config })) });
    const ids = rollouts.map((r) => r.rolloutId);
    const common = ["--store", h.url, "--export", "heartbeater", "--workers", "1", "--concurrency", "4", "--poll-wait", "0.3"];

    const first = await startRunnerProcess([agentModule, ...common, "--worker-id", "runner-a"]);
    processes.push(first);
    // Alive, the agents' spans keep their attempts running well past unresponsive_seconds.
    await waitFor(async () =>
      (await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.every((r) => r.status === RolloutStatus.RUNNING),
    );
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.every((r) => r.status === RolloutStatus.RUNNING)).toBe(true);

    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    await waitFor(async () =>
      (await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.every((r) => r.status === RolloutStatus.REQUEUING),
    );

    const second = await finishOnSecondRunner(ids, common, AttemptStatus.UNRESPONSIVE);
    expect(second.stdout()).toMatch(/agl runner finished: \{"claimed":3,"succeeded":3,/);
  }, 90_000);

  it("SIGTERM stops a runner gracefully, handing its unfinished rollouts back to the queue", async () => {
    const { rollouts } = await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({ sleepMs: 60_000 }) }] });
    const runner = await startRunnerProcess([
      agentModule,
      "--store",
      h.url,
      "--export",
      "sleeper",
      "--workers",
      "1",
      "--shutdown-grace",
      "0.2",
      "--poll-wait",
      "0.3",
    ]);
    processes.push(runner);
    const id = rollouts[0]!.rolloutId;
    await waitFor(async () => (await h.client.getStatistics({})).queueLength === 0);
    runner.child.kill("SIGTERM");
    expect(await runner.exited).toBe(0);
    expect(runner.stdout()).toMatch(/"interrupted":1/);
    expect((await h.client.getRollout({ rolloutId: id })).status).toBe(RolloutStatus.REQUEUING);
  }, 60_000);

  it("with the default rollout config, a SIGKILLed runner's 16 claimed attempts are handed back and its worker is gone", async () => {
    // The store's liveness defaults are six runner heartbeats; here the heartbeat is 0.25 s instead of 5 s.
    await h.close();
    h = await startStoreHarness({ watchdogSeconds: 0.1, store: { defaultUnresponsiveSeconds: 1.5, workerGoneSeconds: 1.5 } });
    // No config: no retry_condition, no unresponsive_seconds. The agents hold without sending a span.
    const { rollouts } = await h.client.enqueueRollouts({
      rollouts: Array.from({ length: 16 }, () => ({ input: jsonValue({ quiet: true }) })),
    });
    const ids = rollouts.map((r) => r.rolloutId);
    const common = [
      "--store",
      h.url,
      "--export",
      "holder",
      "--workers",
      "1",
      "--concurrency",
      "16",
      "--poll-wait",
      "0.3",
      "--heartbeat",
      "0.25",
    ];
    const first = await startRunnerProcess([agentModule, ...common, "--worker-id", "runner-a"]);
    processes.push(first);
    await waitFor(async () => (await h.client.getStatistics({})).queueLength === 0);
    // Alive, its heartbeats keep every attempt and the worker well past the liveness limits.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(new Set((await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.map((r) => r.status))).toEqual(
      new Set([RolloutStatus.PREPARING]),
    );
    expect((await h.client.getWorker({ workerId: "runner-a" })).status).toBe(WorkerStatus.BUSY);

    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");
    await waitFor(async () =>
      (await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.every((r) => r.status === RolloutStatus.REQUEUING),
    );
    expect((await h.client.getWorker({ workerId: "runner-a" })).status).toBe(WorkerStatus.UNKNOWN);

    await finishOnSecondRunner(ids, common, AttemptStatus.UNRESPONSIVE);
  }, 90_000);

  it("SIGTERM hands back in-flight rollouts at once, even agents that ignore the signal, leaving no attempt running", async () => {
    const { rollouts } = await h.client.enqueueRollouts({
      rollouts: Array.from({ length: 8 }, (_, i) => ({ input: jsonValue({ ignoreAbort: i % 2 === 0 }) })),
    });
    const ids = rollouts.map((r) => r.rolloutId);
    const common = ["--store", h.url, "--export", "holder", "--workers", "1", "--concurrency", "8", "--poll-wait", "0.3"];
    const first = await startRunnerProcess([agentModule, ...common, "--worker-id", "runner-a", "--shutdown-grace", "0.3"]);
    processes.push(first);
    await waitFor(async () =>
      (await h.client.queryRollouts({ rolloutIdIn: ids })).rollouts.every((r) => r.status === RolloutStatus.RUNNING),
    );
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    expect(first.stdout()).toMatch(/"interrupted":8/);
    for (const id of ids) {
      const r = await h.client.getRollout({ rolloutId: id });
      expect(r.status).toBe(RolloutStatus.REQUEUING);
      // The handed-back attempt ended at the store; it does not stay running.
      expect(r.latestAttempt?.status).toBe(AttemptStatus.CANCELLED);
      expect(r.latestAttempt?.metadata?.handed_back).toBeTypeOf("string");
    }
    expect((await h.client.getWorker({ workerId: "runner-a" })).status).not.toBe(WorkerStatus.BUSY);

    // Even after another runner finished them, the handed-back attempts stay ended.
    await finishOnSecondRunner(ids, common, AttemptStatus.CANCELLED);
    expect((await h.client.getWorker({ workerId: "runner-a" })).status).not.toBe(WorkerStatus.BUSY);
  }, 90_000);

  it("explains its options and rejects bad ones", async () => {
    const help = await runCli(["run", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: agl run <agent-module> [options]");
    const missing = await runCli(["run"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("give exactly one agent module");
    const bad = await runCli(["run", agentModule, "--concurrency", "0"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--concurrency needs an integer ≥ 1");
    const badKeepalive = await runCli(["run", agentModule, "--keepalive", "soon"]);
    expect(badKeepalive.code).toBe(2);
    expect(badKeepalive.stderr).toContain('--keepalive needs a number of seconds ≥ 0, got "soon"');
    // An agent module that exports no agent stops the runner before it claims anything.
    const noAgent = await runCli(["run", "test/fixtures/not-an-agent.ts", "--store", h.url]);
    expect(noAgent.code).toBe(1);
    expect(noAgent.stderr).toContain("exports no agent");
    expect((await h.client.getStatistics({})).totalRollouts).toBe(0);
  }, 60_000);
});
