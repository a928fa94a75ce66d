import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createStoreClient } from "../../src/client/store-client.js";
import type { Span } from "../../src/gen/agl/v1/types_pb.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";

const dir = mkdtempSync(join(tmpdir(), "agl-durability-"));
const database = join(dir, "agl.db");
const servers: ServerProcess[] = [];

afterAll(async () => {
  for (const server of servers) await server.kill();
  rmSync(dir, { recursive: true, force: true });
});

type SpanInit = Pick<Span, "rolloutId" | "attemptId" | "spanId" | "name">;

describe("durability (SQLite)", () => {
  it("keeps every acknowledged span across kill -9, and a retried batch does not duplicate", async () => {
    const first = await startServerProcess(["--database", database]);
    servers.push(first);
    const client = createStoreClient({ baseUrl: first.url, maxTries: 1 });
    await client.enqueueRollouts({ rollouts: Array.from({ length: 8 }, () => ({})) });
    const { rollouts } = await client.dequeueRollouts({ limit: 8, workerId: "w" });
    expect(rollouts).toHaveLength(8);

    const acked = new Set<string>();
    let unacked: SpanInit[] | undefined;
    let batches = 0;
    const writer = (async () => {
      for (;;) {
        const spans: SpanInit[] = Array.from({ length: 10 }, (_, i) => {
          const rollout = rollouts[(batches + i) % rollouts.length]!;
          return {
            rolloutId: rollout.rolloutId,
            attemptId: rollout.latestAttempt!.attemptId,
            spanId: randomBytes(8).toString("hex"),
            name: "s",
          };
        });
        try {
          const { acks } = await client.addSpans({ spans });
          for (const ack of acks) acked.add(`${ack.rolloutId}/${ack.spanId}`);
          batches++;
        } catch {
          unacked = spans;
          return;
        }
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 400));
    await first.kill();
    await writer;
    client.close();
    expect(batches).toBeGreaterThan(5);
    expect(unacked).toBeDefined();

    const second = await startServerProcess(["--database", database]);
    servers.push(second);
    const again = createStoreClient({ baseUrl: second.url });
    // The batch in flight at the kill may or may not have been committed: retrying it is always safe.
    const retry = await again.addSpans({ spans: unacked! });
    for (const ack of retry.acks) acked.add(`${ack.rolloutId}/${ack.spanId}`);

    const stored: string[] = [];
    for (const rollout of rollouts) {
      const { spans } = await again.querySpans({ rolloutId: rollout.rolloutId });
      stored.push(...spans.map((s) => `${s.rolloutId}/${s.spanId}`));
    }
    expect(new Set(stored).size).toBe(stored.length);
    expect(new Set(stored)).toEqual(acked);
    expect(stored.length).toBe((batches + 1) * 10);
    again.close();
  });
});
