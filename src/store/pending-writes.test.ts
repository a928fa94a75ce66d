import { describe, expect, it } from "vitest";
import { AttemptStatus, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { createMemoryBackend } from "./backends/memory/memory-backend.js";
import { createPendingWrites } from "./pending-writes.js";
import { createStore } from "./store.js";

function deferred() {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("pending writes", () => {
  it("waits for the writes registered so far, failed ones included, then forgets them", async () => {
    const pending = createPendingWrites();
    expect(pending.settled("ro-1")).toBeUndefined();
    const a = deferred();
    const b = deferred();
    pending.add("ro-1", a.promise);
    pending.add("ro-1", b.promise);
    let settled = false;
    void pending.settled("ro-1")?.then(() => (settled = true));
    expect(pending.settled("ro-2")).toBeUndefined();
    a.resolve();
    await tick();
    expect(settled).toBe(false);
    // A write registered after the wait started does not hold it.
    pending.add("ro-1", new Promise(() => {}));
    b.reject(new Error("store down"));
    await tick();
    expect(settled).toBe(true);
  });

  it("holds a rollout's updates and span reads until its pending writes are in, and nothing else", async () => {
    const store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
    await store.enqueueRollouts({ rollouts: [{}, {}] });
    const [mine, other] = (await store.dequeueRollouts({ workerId: "w", limit: 2 })).rollouts;
    const rolloutId = mine!.rolloutId;
    const attemptId = mine!.latestAttempt!.attemptId;
    const write = deferred();
    // As the proxy does: the span write is registered when the answer ends, and lands later.
    const order: string[] = [];
    store.pendingWrites.add(
      rolloutId,
      write.promise
        .then(() => store.addSpans({ spans: [{ rolloutId, attemptId, spanId: "a1b2c3d4e5f60718", name: "chat m" }] }))
        .then(() => order.push("span stored")),
    );
    const finished = store.updateAttempt({ rolloutId, attemptId, status: AttemptStatus.SUCCEEDED }).then((a) => {
      order.push("attempt finished");
      return a;
    });
    const read = store.querySpans({ rolloutId }).then((r) => {
      order.push(`spans read: ${r.spans.length}`);
    });
    const cancelled = store.updateRollout({ rolloutId, status: RolloutStatus.CANCELLED }).catch(() => undefined);
    // Other rollouts and other calls go straight through.
    await store.updateAttempt({ rolloutId: other!.rolloutId, attemptId: other!.latestAttempt!.attemptId, status: AttemptStatus.SUCCEEDED });
    expect((await store.getRollout({ rolloutId })).status).toBe(mine!.status);
    await tick();
    expect(order).toEqual([]);
    write.resolve();
    expect((await finished).status).toBe(AttemptStatus.SUCCEEDED);
    await read;
    await cancelled;
    expect(order).toEqual(["span stored", "attempt finished", "spans read: 1"]);
    expect((await store.querySpans({ rolloutId })).spans).toHaveLength(1);
    await store.close();
  });
});
