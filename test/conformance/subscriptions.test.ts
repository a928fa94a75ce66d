/**
 * `StorageBackend.subscribe`: one semantics for every backend (src/store/listeners.ts). Each call is a subscription of
 * its own, so a listener subscribed twice hears each committed event twice, and each unsubscribe ends only its own.
 */
import { describe, expect, it } from "vitest";
import type { StoreEvent } from "../../src/store/backend.js";
import { backends } from "./backends.js";
import { enqueueN, openStore } from "./harness.js";

describe.each(backends)("subscriptions [$name]", (def) => {
  it("a listener subscribed twice hears each event twice, and each unsubscribe ends one subscription", async () => {
    const { store, backend } = await openStore(def);
    const heard: StoreEvent[] = [];
    const listener = (event: StoreEvent) => heard.push(event);
    const first = backend.subscribe(listener);
    const second = backend.subscribe(listener);

    await enqueueN(store, 1);
    expect(heard.filter((e) => e.kind === "queued")).toHaveLength(2);

    first();
    first(); // a second call ends nothing more
    heard.length = 0;
    await enqueueN(store, 1);
    expect(heard.filter((e) => e.kind === "queued")).toHaveLength(1);

    second();
    heard.length = 0;
    await enqueueN(store, 1);
    expect(heard).toEqual([]);
  });

  it("a listener that throws neither fails the write nor keeps the event from the others", async () => {
    const { store, backend } = await openStore(def);
    const heard: StoreEvent[] = [];
    const stop = backend.subscribe(() => {
      throw new Error("listener bug");
    });
    const listen = backend.subscribe((event) => heard.push(event));
    const [rollout] = await enqueueN(store, 1);
    expect(rollout?.rolloutId).toBeTruthy();
    expect(heard.filter((e) => e.kind === "queued")).toHaveLength(1);
    stop();
    listen();
  });
});
