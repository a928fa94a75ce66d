/**
 * PostgreSQL restarted under load, on a private cluster of this test (the shared test server keeps serving the other
 * test files): the store server stays up, its clients see UNAVAILABLE while the database is away and success once it
 * is back, waits work again (the LISTEN connection reconnected), and nothing acknowledged is lost.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, RolloutStatus, type Span } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";

const script = fileURLToPath(new URL("../../scripts/postgres.sh", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "agl-pg-restart-"));
const env = { ...process.env, AGL_POSTGRES_DIR: dir };
const postgres = (command: string, ...args: string[]) =>
  execFileSync(script, [command, ...args], { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

let url = "";
let server: ServerProcess | undefined;

beforeAll(() => {
  url = postgres("start");
}, 120_000);

afterAll(async () => {
  await server?.kill();
  try {
    postgres("stop", "--force");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

type SpanInit = Pick<Span, "rolloutId" | "attemptId" | "spanId" | "name">;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("PostgreSQL restarted under load", () => {
  it("clients get UNAVAILABLE, then success; the server reconnects and loses nothing acknowledged", async () => {
    server = await startServerProcess(["--database", url]);
    // One try per call: the test sees each UNAVAILABLE itself and repeats the call, as a runner's retry policy would.
    const client = createStoreClient({ baseUrl: server.url, maxTries: 1, timeoutMs: 10_000 });
    await client.enqueueRollouts({ rollouts: Array.from({ length: 4 }, () => ({})) });
    const { rollouts } = await client.dequeueRollouts({ limit: 4, workerId: "w" });
    expect(rollouts).toHaveLength(4);

    const acked = new Set<string>();
    const codes: Code[] = [];
    let okAfterFailure = 0;
    let stop = false;
    const writers = rollouts.map(async (rollout) => {
      while (!stop) {
        const spans: SpanInit[] = Array.from({ length: 5 }, () => ({
          rolloutId: rollout.rolloutId,
          attemptId: rollout.latestAttempt!.attemptId,
          spanId: randomBytes(8).toString("hex"),
          name: "s",
        }));
        // A batch is repeated until acknowledged: an outcome-unknown failure must not lose or duplicate it.
        for (;;) {
          try {
            const { acks } = await client.addSpans({ spans });
            for (const ack of acks) acked.add(`${ack.rolloutId}/${ack.spanId}`);
            if (codes.length > 0) okAfterFailure++;
            break;
          } catch (error) {
            codes.push(ConnectError.from(error).code);
            await sleep(50);
          }
        }
      }
    });

    await sleep(500);
    postgres("stop", "--force");
    await sleep(1_000);
    postgres("start");
    // Load continues until every writer got through again a few times.
    const deadline = Date.now() + 20_000;
    while (okAfterFailure < 20 && Date.now() < deadline) await sleep(100);
    stop = true;
    await Promise.all(writers);

    expect(codes.length).toBeGreaterThan(0);
    expect(new Set(codes)).toEqual(new Set([Code.Unavailable]));
    expect(okAfterFailure).toBeGreaterThanOrEqual(20);
    expect(server.child.exitCode).toBeNull();

    // Waits work again across the restart: the server's LISTEN connection is back.
    const waiting = client.dequeueRollouts({ workerId: "w2", waitSeconds: 10 });
    await sleep(300);
    const [late] = (await client.enqueueRollouts({ rollouts: [{}] })).rollouts;
    const started = Date.now();
    expect((await waiting).rollouts.map((r) => r.rolloutId)).toEqual([late!.rolloutId]);
    expect(Date.now() - started).toBeLessThan(5_000);

    const stored: string[] = [];
    for (const rollout of rollouts) {
      await client.updateAttempt({ rolloutId: rollout.rolloutId, attemptId: "latest", status: AttemptStatus.SUCCEEDED });
      expect((await client.getRollout({ rolloutId: rollout.rolloutId })).status).toBe(RolloutStatus.SUCCEEDED);
      for (const span of (await client.querySpans({ rolloutId: rollout.rolloutId })).spans) stored.push(`${span.rolloutId}/${span.spanId}`);
    }
    expect(new Set(stored).size).toBe(stored.length);
    expect(new Set(stored)).toEqual(acked);
    client.close();
    await server.stop();
    // It said what happened, without crashing.
    expect(server.stderr()).toMatch(/\[store\] postgres: .*(terminating connection|ECONNREFUSED)/);
  }, 60_000);
});
