/** What taking a span promise costs the store: the LLM proxy promises the span of every call it serves. */
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import type { StorageBackend } from "../../src/store/backend.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore } from "../../src/store/store.js";

/** The memory backend, counting the transactions the store runs on it. */
function countingBackend() {
  const backend = createMemoryBackend();
  let transactions = 0;
  const counted: StorageBackend = {
    ...backend,
    name: backend.name,
    transaction: (fn, options) => {
      transactions++;
      return backend.transaction(fn, options);
    },
    subscribe: (listener) => backend.subscribe(listener),
    close: () => backend.close(),
  };
  return { counted, transactions: () => transactions };
}

describe("span promises", () => {
  it("read a rollout once: later promises of its spans, alone or on AddSpans, need no transaction", async () => {
    const { counted, transactions } = countingBackend();
    const store = createStore({ backend: counted, watchdogIntervalSeconds: 0 });
    try {
      await store.enqueueRollouts({ rollouts: [{}] });
      const [rollout] = (await store.dequeueRollouts({ workerId: "w" })).rollouts;
      const ids = { rolloutId: rollout!.rolloutId, attemptId: rollout!.latestAttempt!.attemptId };
      const before = transactions();
      await store.expectSpans({ ...ids, spanIds: ["s1"] });
      expect(transactions()).toBe(before + 1);
      await store.expectSpans({ ...ids, spanIds: ["s2"] });
      const carried = await store.addSpans({ spans: [], expect: [{ ...ids, spanIds: ["s3"] }] });
      expect([carried.expectHeld, transactions()]).toEqual([[true], before + 1]);
      // A rollout that does not exist is read every time, and refused.
      for (let i = 0; i < 2; i++) {
        await expect(store.expectSpans({ rolloutId: "ro-000000000000", attemptId: ids.attemptId, spanIds: ["s"] })).rejects.toMatchObject({
          code: Code.NotFound,
        });
      }
      expect(transactions()).toBe(before + 3);
    } finally {
      await store.close();
    }
  });
});
