import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcClient, type GrpcClient, grpcError, startTestServer, structValue, unary, type TestServer } from "./helpers.js";

describe("gRPC (grpc-js client, proto-loader) through the one port", () => {
  let t: TestServer;
  let store: GrpcClient;
  let resources: GrpcClient;

  beforeAll(async () => {
    t = await startTestServer();
    store = grpcClient("agl.v1.LightningStore", t.address);
    resources = grpcClient("agl.v1.ResourceService", t.address);
  });
  afterAll(async () => {
    store.close();
    resources.close();
    await t.close();
  });

  it("serves every ResourceService RPC, and WatchResources streams new versions", async () => {
    const added = await unary(resources, "addResources", {
      resources: { prompt: { promptTemplate: { template: "Solve {q}", engine: "TEMPLATE_ENGINE_F_STRING" } } },
    });
    expect(added.resourcesId).toMatch(/.+/);
    expect(added.version).toBe(1);

    // include_latest makes the first message prove the watch is registered before the next version is published.
    const watch = resources.watchResources({ includeLatest: true }) as grpc.ClientReadableStream<unknown>;
    const updates = watch[Symbol.asyncIterator]();
    expect((await updates.next()).value.version).toBe(1);
    const updated = await unary(resources, "updateResources", {
      resourcesId: added.resourcesId,
      resources: { prompt: { promptTemplate: { template: "Answer {q}", engine: "TEMPLATE_ENGINE_F_STRING" } } },
    });
    expect(updated.version).toBe(2);
    const second = (await updates.next()).value;
    expect(second.version).toBe(2);
    expect(second.resources.prompt.promptTemplate.template).toBe("Answer {q}");
    watch.cancel();
    await expect(updates.next()).rejects.toMatchObject({ code: grpc.status.CANCELLED });

    const got = await unary(resources, "getResources", { resourcesId: added.resourcesId });
    expect(got.resources.prompt.promptTemplate.template).toBe("Answer {q}");
    const latest = await unary(resources, "getLatestResources", {});
    expect(latest.resources.resourcesId).toBe(added.resourcesId);
    const queried = await unary(resources, "queryResources", { resourcesIdContains: added.resourcesId.slice(0, 6) });
    expect(queried.resources.length).toBeGreaterThan(0);

    const missing = await grpcError(unary(resources, "getResources", { resourcesId: "rs-missing" }));
    expect(missing.code).toBe(grpc.status.NOT_FOUND);
  });

  it("serves every LightningStore RPC", async () => {
    const enqueued = await unary(store, "enqueueRollouts", { rollouts: [{ input: structValue({ q: 1 }), mode: "ROLLOUT_MODE_TRAIN" }] });
    expect(enqueued.rollouts).toHaveLength(1);
    const rolloutId: string = enqueued.rollouts[0].rolloutId;
    expect(enqueued.rollouts[0].status).toBe("ROLLOUT_STATUS_QUEUING");

    const dequeued = await unary(store, "dequeueRollouts", { limit: 1, workerId: "w1" });
    expect(dequeued.rollouts.map((r: { rolloutId: string }) => r.rolloutId)).toEqual([rolloutId]);
    const attemptId: string = dequeued.rollouts[0].latestAttempt.attemptId;

    const seqIds = await unary(store, "nextSpanSequenceIds", {
      requests: [
        { rolloutId, attemptId },
        { rolloutId, attemptId },
      ],
    });
    expect(seqIds.sequenceIds).toHaveLength(2);
    const spans = await unary(store, "addSpans", {
      spans: [{ rolloutId, attemptId, traceId: "t1", spanId: "s1", name: "agent", attributes: { reward: { doubleValue: 1 } } }],
    });
    expect(spans.acks).toHaveLength(1);
    const querySpans = await unary(store, "querySpans", { rolloutId, attemptId: "latest" });
    expect(querySpans.spans.map((s: { spanId: string }) => s.spanId)).toEqual(["s1"]);

    const attempt = await unary(store, "updateAttempt", { rolloutId, attemptId, status: "ATTEMPT_STATUS_SUCCEEDED" });
    expect(attempt.status).toBe("ATTEMPT_STATUS_SUCCEEDED");
    const waited = await unary(store, "waitForRollouts", { rolloutIds: [rolloutId], timeoutSeconds: 5 });
    expect(waited.rollouts.map((r: { status: string }) => r.status)).toEqual(["ROLLOUT_STATUS_SUCCEEDED"]);
    const got = await unary(store, "getRollout", { rolloutId });
    expect(got.input.structValue.fields.q.numberValue).toBe(1);
    const queried = await unary(store, "queryRollouts", { statusIn: ["ROLLOUT_STATUS_SUCCEEDED"] });
    expect(queried.rollouts.map((r: { rolloutId: string }) => r.rolloutId)).toContain(rolloutId);
    const attempts = await unary(store, "queryAttempts", { rolloutId });
    expect(attempts.attempts).toHaveLength(1);
    const latestAttempt = await unary(store, "getLatestAttempt", { rolloutId });
    expect(latestAttempt.attempt.attemptId).toBe(attemptId);

    const started = await unary(store, "startRollout", { rollout: { input: structValue({ q: 2 }) }, workerId: "w2" });
    expect(started.status).toBe("ROLLOUT_STATUS_PREPARING");
    const retried = await unary(store, "startAttempt", { rolloutId: started.rolloutId, workerId: "w2" });
    expect(retried.latestAttempt.sequenceId).toBe(2);
    const cancelled = await unary(store, "updateRollout", { rolloutId: started.rolloutId, status: "ROLLOUT_STATUS_CANCELLED" });
    expect(cancelled.status).toBe("ROLLOUT_STATUS_CANCELLED");

    const worker = await unary(store, "updateWorker", { workerId: "w1", heartbeatStats: { fields: { load: { numberValue: 0.5 } } } });
    expect(worker.workerId).toBe("w1");
    expect((await unary(store, "getWorker", { workerId: "w1" })).workerId).toBe("w1");
    const workers = await unary(store, "queryWorkers", {});
    expect(workers.workers.map((w: { workerId: string }) => w.workerId)).toContain("w1");

    const stats = await unary(store, "getStatistics", {});
    expect(stats.backend).toBe("memory");
    expect(stats.totalRollouts).toBe(2);
  });

  it("maps store errors to gRPC codes with their message", async () => {
    const error = await grpcError(unary(store, "getRollout", { rolloutId: "ro-nope" }));
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    expect(error.details).toMatch(/ro-nope/);
  });

  it("propagates the deadline: a long-poll ends with DEADLINE_EXCEEDED", async () => {
    const started = Date.now();
    const error = await grpcError(
      unary(store, "dequeueRollouts", { limit: 1, workerId: "w9", waitSeconds: 30 }, new grpc.Metadata(), { deadline: Date.now() + 300 }),
    );
    expect(error.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
