/**
 * The background watchdog between its full passes (watchdogFullScanSeconds): it looks only at the rollouts due, at
 * the deadlines of the attempts this store wrote, so its cost follows what is due rather than what is active.
 * Time is a fake clock; the passes run on their real timer.
 */
import { describe, expect, it } from "vitest";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { addSpan, openStore, startRollout } from "./harness.js";
import type { StorageBackend } from "../../src/store/backend.js";
import type { Store } from "../../src/store/store.js";

const passes = { watchdogIntervalSeconds: 0.02, watchdogFullScanSeconds: 1e9, scanDebounceSeconds: 1e9 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function statusWithin(store: Store, rolloutId: string, expected: AttemptStatus, ms = 3000): Promise<AttemptStatus | undefined> {
  const deadline = Date.now() + ms;
  let status: AttemptStatus | undefined;
  while (Date.now() < deadline) {
    status = (await store.getLatestAttempt({ rolloutId })).attempt?.status;
    if (status === expected) return status;
    await sleep(20);
  }
  return status;
}

describe.each(backends)("watchdog deadlines [$name]", (def) => {
  it("acts on an attempt at its deadline, measured from its last heartbeat, without a full pass", async () => {
    const { store, clock } = await openStore(def, passes);
    await sleep(100); // the first pass is a full one; from here on only due rollouts are read
    const { rolloutId, attemptId } = await startRollout(store, { config: { unresponsiveSeconds: 5 } });
    const quiet = await startRollout(store, { config: { timeoutSeconds: 8 } });
    clock.advance(4);
    await addSpan(store, rolloutId, attemptId);
    clock.advance(4); // 8 s after the start, 4 s after the heartbeat: due at its first deadline, not yet silent
    await sleep(200);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.RUNNING);
    expect((await store.getLatestAttempt({ rolloutId: quiet.rolloutId })).attempt?.status).toBe(AttemptStatus.PREPARING);
    clock.advance(2);
    expect(await statusWithin(store, rolloutId, AttemptStatus.UNRESPONSIVE)).toBe(AttemptStatus.UNRESPONSIVE);
    expect(await statusWithin(store, quiet.rolloutId, AttemptStatus.TIMEOUT)).toBe(AttemptStatus.TIMEOUT);
  });

  it("acts on the rollouts a pass took as due when its transaction runs again", async () => {
    // Every transaction's first run is undone after its body ran, and runs again, as a retried transaction does.
    const retried = new Error("run it again");
    const { store, clock } = await openStore(
      {
        ...def,
        create: async () => {
          const backend = await def.create();
          const transaction: StorageBackend["transaction"] = async (fn, options) => {
            let first = true;
            for (;;) {
              try {
                return await backend.transaction(async (tx) => {
                  const value = await fn(tx);
                  if (first) throw retried;
                  return value;
                }, options);
              } catch (error) {
                if (error !== retried) throw error;
                first = false;
              }
            }
          };
          return new Proxy(backend, {
            get: (target, key) => (key === "transaction" ? transaction : Reflect.get(target, key, target)),
          });
        },
      },
      passes,
    );
    await sleep(100);
    const { rolloutId } = await startRollout(store, { config: { timeoutSeconds: 2 } });
    clock.advance(3);
    expect(await statusWithin(store, rolloutId, AttemptStatus.TIMEOUT)).toBe(AttemptStatus.TIMEOUT);
  });

  it("leaves rollouts whose attempts it did not write to the full passes", async () => {
    const { store, backend, clock } = await openStore(def, passes);
    await store.queryRollouts({}); // a store's first call scans at once (the debounce starts there)
    await sleep(100);
    // Another store on the same storage (a second server, with its watchdog off) starts the attempt.
    const { store: other } = await openStore(
      { ...def, create: async () => backend },
      { watchdogIntervalSeconds: 0, scanDebounceSeconds: 1e9 },
    );
    // Its fake clock starts where this one is (neither has moved yet).
    const { rolloutId } = await startRollout(other, { config: { timeoutSeconds: 1 } });
    clock.advance(5);
    await sleep(200);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.PREPARING);
    expect(await store.runWatchdog()).toBe(1);
    expect((await store.getLatestAttempt({ rolloutId })).attempt?.status).toBe(AttemptStatus.TIMEOUT);
  });
});
