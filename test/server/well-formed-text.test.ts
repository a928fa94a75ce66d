/**
 * Text reads back the same whatever the protocol and backend: lone UTF-16 surrogates, which only JSON (and in-process
 * callers) can send, are replaced by U+FFFD when the store accepts them (docs/store-semantics.md, "Text").
 */
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterEach, describe, expect, it } from "vitest";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { RolloutSchema, SpanSchema, ResourcesUpdateSchema } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer, type StoreServer } from "../../src/server/store-server.js";
import { createStore, type Store } from "../../src/store/store.js";
import { backends } from "../conformance/backends.js";
import type { WireJson } from "../support/wire-json.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(create: () => Promise<Store["backend"]>): Promise<{ store: Store; server: StoreServer; grpc: StoreClient }> {
  const store = createStore({ backend: await create(), watchdogIntervalSeconds: 0 });
  const server = await startStoreServer({ store, port: 0 });
  const grpc = createStoreClient({ baseUrl: server.url });
  cleanups.push(
    () => store.close(),
    () => server.close(),
    () => grpc.close(),
  );
  return { store, server, grpc };
}

/** A Connect JSON call; `body` is JSON text, so `\ud800` arrives as a lone surrogate. */
async function connect(server: StoreServer, method: string, body: unknown): Promise<WireJson> {
  const service = method.endsWith("Resources") ? "ResourceService" : "LightningStore";
  const res = await fetch(`${server.url}/agl.v1.${service}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const lone = "a\ud800b\udc00c";
const fixed = "a\ufffdb\ufffdc";
const pair = "emoji \ud83d\ude00 stays";

describe.each(backends)("text over every protocol [$name]", (def) => {
  it("a lone surrogate sent over Connect JSON reads back as U+FFFD over Connect JSON and gRPC alike; pairs stay", async () => {
    const { store, server, grpc } = await serve(def.create);
    const { rollouts } = await connect(server, "EnqueueRollouts", {
      rollouts: [{ input: { [lone]: [lone, pair] }, metadata: { note: lone, [lone]: 1 }, groupId: pair }],
    });
    const rolloutId = rollouts[0].rolloutId as string;
    const [claimed] = (await grpc.dequeueRollouts({ workerId: "w" })).rollouts;
    const attemptId = claimed!.latestAttempt!.attemptId;
    await connect(server, "AddSpans", {
      spans: [
        {
          rolloutId,
          attemptId,
          traceId: "0af7651916cd43dd8448eb211c80319c",
          spanId: "b7ad6b7169203331",
          name: pair,
          attributes: { [`key.${pair}`]: { stringValue: pair }, plain: { boolValue: true } },
          startTime: 1,
          endTime: 2,
        },
      ],
    });
    await connect(server, "AddResources", {
      resources: { prompt: { promptTemplate: { template: pair, engine: "TEMPLATE_ENGINE_F_STRING" } }, config: { json: { [lone]: lone } } },
    });

    const expected = {
      input: { [fixed]: [fixed, pair] },
      metadata: { note: fixed, [fixed]: 1 },
      groupId: pair,
      span: { name: pair, attributes: { [`key.${pair}`]: { stringValue: pair }, plain: { boolValue: true } } },
      resources: {
        prompt: { promptTemplate: { template: pair, engine: "TEMPLATE_ENGINE_F_STRING" } },
        config: { json: { [fixed]: fixed } },
      },
    };
    // Over Connect JSON.
    const viaJson = await connect(server, "GetRollout", { rolloutId });
    const spansJson = (await connect(server, "QuerySpans", { rolloutId })).spans;
    const resourcesJson = (await connect(server, "GetLatestResources", {})).resources.resources;
    expect({ input: viaJson.input, metadata: viaJson.metadata, groupId: viaJson.groupId }).toEqual({
      input: expected.input,
      metadata: expected.metadata,
      groupId: expected.groupId,
    });
    expect(spansJson[0]).toMatchObject(expected.span);
    expect(resourcesJson).toEqual(expected.resources);
    // Over gRPC (binary, through UTF-8), and in process.
    for (const api of [grpc, store]) {
      const rollout = await api.getRollout({ rolloutId });
      expect(toJson(RolloutSchema, rollout)).toMatchObject({
        input: expected.input,
        metadata: expected.metadata,
        groupId: expected.groupId,
      });
      expect(toJson(ValueSchema, rollout.input!)).toEqual(expected.input);
      const [span] = (await api.querySpans({ rolloutId })).spans;
      expect(toJson(SpanSchema, span!)).toMatchObject(expected.span);
      const latest = (await api.getLatestResources({})).resources!;
      expect(toJson(ResourcesUpdateSchema, latest)).toMatchObject({ resources: expected.resources });
    }
    // In a plain string field or a map key, Connect JSON's decoder refuses a lone surrogate outright.
    await expect(connect(server, "QueryRollouts", { groupId: lone })).rejects.toThrow(/400 .*invalid_argument.*invalid UTF8/);
    await expect(connect(server, "AddResources", { resources: { [lone]: { json: 1 } } })).rejects.toThrow(
      /400 .*invalid_argument.*invalid UTF8/,
    );
  });

  it("in-process callers get the same: what the store keeps is what gRPC clients read", async () => {
    const { store, grpc } = await serve(def.create);
    const { rollouts } = await store.enqueueRollouts({ rollouts: [{ metadata: { [lone]: lone }, groupId: lone }] });
    const rolloutId = rollouts[0]!.rolloutId;
    expect(rollouts[0]).toMatchObject({ metadata: { [fixed]: fixed }, groupId: fixed });
    for (const api of [store, grpc])
      expect(await api.getRollout({ rolloutId }), "in process, then gRPC").toMatchObject({ metadata: { [fixed]: fixed }, groupId: fixed });
    // A filter matches the stored text whichever form it came in.
    for (const groupId of [lone, fixed])
      expect((await store.queryRollouts({ groupId })).rollouts.map((r) => r.rolloutId)).toEqual([rolloutId]);
  });
});
