/**
 * The in-process store behaves like the network client: it neither keeps references to the caller's request
 * objects nor hands out references to what it stores, and it does not modify requests.
 */
import { clone, create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AttributeValueSchema, RolloutStatus, SpanSchema, WorkerStatus } from "../../src/gen/agl/v1/types_pb.js";
import { backends } from "./backends.js";
import { json, makeSpan, openStore, spec, startRollout, unjson } from "./harness.js";

describe.each(backends)("request and response isolation [$name]", (def) => {
  it("AddSpans does not modify the caller's spans", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const span = makeSpan(rolloutId, attemptId, { name: "original" });
    const before = clone(SpanSchema, span);
    const ack = (await store.addSpans({ spans: [span] })).acks[0]!;
    expect(ack.sequenceId).toBe(1);
    expect(span).toEqual(before); // sequence_id 0 stays 0 in the caller's object, as over the network
  });

  it("AddSpans keeps no reference to the caller's spans", async () => {
    const { store } = await openStore(def);
    const { rolloutId, attemptId } = await startRollout(store);
    const span = makeSpan(rolloutId, attemptId, { name: "original" });
    const ack = (await store.addSpans({ spans: [span] })).acks[0]!;
    span.name = "mutated by caller";
    span.sequenceId = 77;
    span.attributes.k = create(AttributeValueSchema, { value: { case: "stringValue", value: "x" } });
    const [stored] = (await store.querySpans({ rolloutId })).spans;
    expect(stored!.name).toBe("original");
    expect(stored!.sequenceId).toBe(ack.sequenceId);
    expect(Object.keys(stored!.attributes)).toEqual([]);
  });

  it("EnqueueRollouts keeps no reference to the caller's input, metadata or config", async () => {
    const { store } = await openStore(def);
    const metadata = { tags: ["a"] };
    const config = { maxAttempts: 2, retryCondition: [] };
    const input = json({ q: 1 });
    const s = spec({}, { metadata, config });
    s.input = input;
    const [r] = (await store.enqueueRollouts({ rollouts: [s] })).rollouts;
    metadata.tags.push("mutated");
    config.maxAttempts = 9;
    input.kind = { case: "stringValue", value: "mutated" };
    const got = await store.getRollout({ rolloutId: r!.rolloutId });
    expect(got.metadata).toEqual({ tags: ["a"] });
    expect(got.config?.maxAttempts).toBe(2);
    expect(unjson(got.input)).toEqual({ q: 1 });
  });

  it("returned objects are copies", async () => {
    const { store } = await openStore(def);
    const { rolloutId, rollout } = await startRollout(store, { metadata: { k: "v" } }, "w");
    rollout.status = RolloutStatus.SUCCEEDED;
    rollout.metadata!.k = "changed";
    rollout.latestAttempt!.workerId = "changed";
    const got = await store.getRollout({ rolloutId });
    expect(got.status).toBe(RolloutStatus.PREPARING);
    expect(got.metadata).toEqual({ k: "v" });
    expect(got.latestAttempt?.workerId).toBe("w");
    got.status = RolloutStatus.FAILED;
    const queried = (await store.queryRollouts({})).rollouts[0]!;
    expect(queried.status).toBe(RolloutStatus.PREPARING);
    queried.config!.maxAttempts = 50;
    expect((await store.getRollout({ rolloutId })).config?.maxAttempts).toBe(1);
    const w = await store.getWorker({ workerId: "w" });
    w.status = WorkerStatus.IDLE;
    expect((await store.getWorker({ workerId: "w" })).status).toBe(WorkerStatus.BUSY);
  });

  it("UpdateWorker and AddResources keep no reference to the caller's objects", async () => {
    const { store } = await openStore(def);
    const stats = { cpu: 1 };
    await store.updateWorker({ workerId: "w", heartbeatStats: stats });
    stats.cpu = 99;
    expect((await store.getWorker({ workerId: "w" })).heartbeatStats).toEqual({ cpu: 1 });
    const value = json({ v: 1 });
    const added = await store.addResources({ resources: { r: { kind: { case: "json", value } } } });
    value.kind = { case: "numberValue", value: 2 };
    const r = (await store.getResources({ resourcesId: added.resourcesId })).resources.r?.kind;
    expect(r?.case === "json" ? unjson(r.value) : undefined).toEqual({ v: 1 });
  });
});
