/**
 * Fault: the network between runners and the store is cut mid-run, then restored. The runners (`agl run`) live in a
 * network namespace of their own, joined to the store server (`agl serve`, bound to this host's end of a veth pair)
 * by one link, which the test takes down for a few seconds while the agents keep emitting spans and some of them
 * finish. Afterwards the runners are on new connections, every rollout has succeeded once, and every span the agents
 * emitted is stored exactly once — those emitted during the cut included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, type Span } from "../../src/gen/agl/v1/types_pb.js";
import { createNetNamespace, type NetNamespace } from "../support/netns.js";
import { type RunnerProcess, startRunnerProcess } from "../support/runner-process.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { jsonValue, waitFinished } from "../support/store-harness.js";

let ns: NetNamespace | undefined;
let server: ServerProcess | undefined;
let client: StoreClient | undefined;
const runners: RunnerProcess[] = [];

beforeAll(() => {
  ns = createNetNamespace();
});
afterAll(async () => {
  for (const runner of runners) {
    if (runner.child.exitCode === null && runner.child.signalCode === null) runner.child.kill("SIGKILL");
    await runner.exited;
  }
  client?.close();
  await server?.kill();
  ns?.delete();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const bodyOf = (s: Span) => {
  const body = s.attributes["agentlightning.message.body"]?.value;
  return body?.case === "stringValue" ? body.value : s.name;
};
const logs = () => runners.map((p) => `--- stdout\n${p.stdout()}--- stderr\n${p.stderr()}`).join("\n");

describe("fault: the network between runners and the store is cut", () => {
  it("runners reconnect, every rollout succeeds once, and every span arrives exactly once", async () => {
    const net = ns!;
    server = await startServerProcess(["--memory", "--host", net.hostAddress]);
    const port = Number(new URL(server.url).port);
    client = createStoreClient({ baseUrl: server.url });

    // Two runners in the namespace with room for three rollouts each: all six are claimed before the cut (a claim
    // answered into a dead link would leave an attempt nobody runs, which is the watchdog's business, not this
    // test's). They keep polling the empty queue throughout, so both reconnect as soon as the link is back.
    const common: string[] = [
      "test/fixtures/agents.ts",
      "--export",
      "stepper",
      "--store",
      server.url,
      "--workers",
      "1",
      "--concurrency",
      "3",
    ];
    // Pings every second: a dead connection is noticed within two (the default is 10 s).
    common.push("--keepalive", "1");
    for (const id of ["ns-a", "ns-b"]) {
      runners.push(await startRunnerProcess([...common, "--worker-id", id, "--poll-wait", "0.3"], {}, net.exec));
    }
    // 200 ms per step: the rollouts end 3 to 12 s after they start, about four of them during the cut.
    const stepsOf = [15, 20, 25, 30, 50, 60];
    const ids = (
      await client.enqueueRollouts({ rollouts: stepsOf.map((steps) => ({ input: jsonValue({ steps, stepMs: 200 }) })) })
    ).rollouts.map((r) => r.rolloutId);
    const until = Date.now() + 30_000;
    while ((await client.queryRollouts({ rolloutIdIn: ids, statusIn: [RolloutStatus.RUNNING] })).rollouts.length < ids.length) {
      if (Date.now() > until) throw new Error(`the rollouts did not all start\n${logs()}`);
      await sleep(100);
    }
    const before = net.connections(port);
    expect(before.length).toBeGreaterThanOrEqual(2);

    await sleep(1_000);
    const cutAt = Date.now();
    net.cut();
    await sleep(5_000);
    net.restore();
    const restoredAt = Date.now();
    // The runners noticed the dead connections, dropped them, and are back on new ones.
    let after: string[] = [];
    for (const giveUp = Date.now() + 10_000; Date.now() < giveUp; await sleep(100)) {
      after = net.connections(port);
      if (after.length >= 2 && after.every((p) => !before.includes(p))) break;
    }
    expect(after.length, logs()).toBeGreaterThanOrEqual(2);
    expect(after.filter((p) => before.includes(p))).toEqual([]);

    const finished = await waitFinished(client, ids, 60).catch((error: Error) => {
      throw new Error(`${error.message}\n${logs()}`);
    });
    expect(finished.map((r) => r.status)).toEqual(ids.map(() => RolloutStatus.SUCCEEDED));
    for (const runner of runners) runner.child.kill("SIGTERM");
    const exits = await Promise.all(runners.map((r) => r.exited));
    expect(exits, logs()).toEqual([0, 0]);
    for (const runner of runners) expect(runner.stdout()).toMatch(/agl runner finished: \{"claimed":3,"succeeded":3,"failed":0,/);

    let emittedDuringCut = 0;
    const workers: string[] = [];
    for (const [i, id] of ids.entries()) {
      const { attempts } = await client.queryAttempts({ rolloutId: id });
      expect(attempts.map((a) => a.status)).toEqual([AttemptStatus.SUCCEEDED]);
      workers.push(attempts[0]!.workerId);
      const { spans } = await client.querySpans({ rolloutId: id });
      const expected = [
        ...Array.from({ length: stepsOf[i]! }, (_, k) => `step ${k}`),
        "agentlightning.annotation",
        "agentlightning.rollout",
      ];
      expect(spans.map(bodyOf).sort()).toEqual(expected.sort());
      expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
      expect(new Set(spans.map((s) => s.sequenceId)).size).toBe(spans.length);
      emittedDuringCut += spans.filter((s) => s.startTime! * 1000 > cutAt + 200 && s.startTime! * 1000 < restoredAt - 200).length;
    }
    expect(workers.sort()).toEqual(["ns-a", "ns-a", "ns-a", "ns-b", "ns-b", "ns-b"]);
    const total = stepsOf.reduce((n, steps) => n + steps + 2, 0);
    expect((await client.getStatistics({})).totalSpans).toBe(total);
    // The agents kept emitting while the link was down (six of them, five steps a second each): those spans waited
    // in the runners and arrived.
    expect(emittedDuringCut).toBeGreaterThan(50);
  }, 90_000);
});
