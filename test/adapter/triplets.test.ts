/** Spans → triplets: call detection and deduplication, reward matching, transition and trajectory samples. */
import { create, type DescMessage, isMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import * as sc from "../../src/core/semconv.js";
import { spansToTriplets } from "../../src/adapter/spans-to-triplets.js";
import { TripletSchema, TripletStatsSchema } from "../../src/gen/agl/v1/triplets_pb.js";
import { llmSpan, rewardSpan, span } from "../support/span-factory.js";

const root = span({ id: "root", seq: 1 });

/** What `create()` makes of a message's fields. */
const createdAgain = <Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>) => {
  const { $typeName: _, ...fields } = message;
  return create(schema, fields as unknown as MessageInitShape<Desc>);
};

describe("LLM calls", () => {
  it("keeps the proxy's record when a client hook recorded the same call, nested or not", () => {
    const spans = [
      root,
      // The openai fetch wrapper's span, with the proxy's span under it (linked by traceparent).
      llmSpan({ id: "client", parent: "root", seq: 3, source: sc.LlmSource.openaiFetch, prompt: [9], response: [9], responseId: "r1" }),
      llmSpan({ id: "proxy", parent: "client", seq: 2, prompt: [1, 2], response: [3], responseId: "r1" }),
      // A framework span and a proxy span of another call, in two unrelated traces.
      span({ id: "fw", parent: "root", seq: 4, attrs: { [sc.GEN_AI_OPERATION_NAME]: "chat", [sc.GEN_AI_RESPONSE_ID]: "r2" } }),
      llmSpan({ id: "proxy2", seq: 5, prompt: [1, 2, 3, 4], response: [5], responseId: "r2" }),
    ];
    const out = spansToTriplets(spans);
    expect(out.triplets.map((t) => t.spanIds)).toEqual([["proxy"], ["proxy2"]]);
    expect(out.stats).toMatchObject({ llmCalls: 2, duplicateCalls: 2, callsWithoutTokenIds: 0 });
  });

  it("leaves out judge calls inside reward computations, failed calls and calls without ids — counting them", () => {
    const spans = [
      root,
      llmSpan({ id: "a", parent: "root", seq: 2, prompt: [1], response: [2] }),
      span({ id: "judge", parent: "root", seq: 3, name: sc.AGL_OPERATION, attrs: { [sc.AGL_OPERATION_NAME]: sc.AGL_REWARD } }),
      llmSpan({ id: "j", parent: "judge", seq: 4, prompt: [7], response: [8] }),
      llmSpan({ id: "failed", parent: "root", seq: 5, prompt: [1], response: [2], error: true }),
      span({ id: "noids", parent: "root", seq: 6, attrs: { [sc.GEN_AI_OPERATION_NAME]: "chat" } }),
    ];
    const out = spansToTriplets(spans);
    expect(out.triplets.map((t) => t.spanIds[0])).toEqual(["a"]);
    expect(out.stats).toMatchObject({ llmCalls: 3, failedCalls: 1, callsWithoutTokenIds: 1 });
    expect(spansToTriplets(spans, { includeCallsInReward: true }).triplets.map((t) => t.spanIds[0])).toEqual(["a", "j"]);
  });

  it("filters calls by their nearest agent", () => {
    const spans = [
      root,
      span({ id: "p", parent: "root", seq: 2, attrs: { [sc.GEN_AI_AGENT_NAME]: "planner" } }),
      llmSpan({ id: "c1", parent: "p", seq: 3, prompt: [1], response: [2] }),
      span({ id: "w", parent: "p", seq: 4, attrs: { [sc.LANGCHAIN_CHAIN_TYPE]: "worker" } }),
      llmSpan({ id: "c2", parent: "w", seq: 5, prompt: [1], response: [2] }),
    ];
    expect(spansToTriplets(spans, { agentNameContains: "plan" }).triplets.map((t) => t.spanIds[0])).toEqual(["c1"]);
    expect(spansToTriplets(spans, { agentNameContains: "work" }).triplets.map((t) => t.spanIds[0])).toEqual(["c2"]);
  });
});

describe("reward matching", () => {
  const calls = [2, 4, 6].map((seq) => llmSpan({ id: `c${seq}`, parent: "root", seq, prompt: [seq], response: [seq] }));

  it("first occurrence: each reward goes to the latest earlier call without one, by sequence id", () => {
    const rewards = [
      rewardSpan({ id: "r5", parent: "root", seq: 5, value: 0.1 }),
      rewardSpan({ id: "r7", parent: "root", seq: 7, value: 0.2 }),
      rewardSpan({ id: "r8", parent: "root", seq: 8, value: 0.3 }),
    ];
    const out = spansToTriplets([root, ...calls, ...rewards]);
    expect(out.triplets.map((t) => t.reward)).toEqual([0.3, 0.1, 0.2]);
    expect(out.finalReward).toBe(0.3);
    expect(out.stats.unmatchedRewards).toBe(0);
  });

  it("rewards before any call find none; first sibling stays under the same parent; final gives everyone the last", () => {
    const spans = [
      root,
      rewardSpan({ id: "early", parent: "root", seq: 1, value: 9 }), // in the root's slot, before every call
      span({ id: "A", parent: "root", seq: 2 }),
      llmSpan({ id: "ca", parent: "A", seq: 3, prompt: [1], response: [2] }),
      span({ id: "B", parent: "root", seq: 4 }),
      llmSpan({ id: "cb", parent: "B", seq: 5, prompt: [1], response: [2] }),
      rewardSpan({ id: "ra", parent: "A", seq: 6, value: 0.8 }),
    ];
    expect(spansToTriplets(spans).triplets.map((t) => t.reward)).toEqual([undefined, 0.8]);
    expect(spansToTriplets(spans).stats.unmatchedRewards).toBe(1);
    expect(spansToTriplets(spans, { rewardMatch: "first_sibling" }).triplets.map((t) => t.reward)).toEqual([0.8, undefined]);
    expect(spansToTriplets(spans, { rewardMatch: "final" }).triplets.map((t) => t.reward)).toEqual([0.8, 0.8]);
  });

  it("reads AgentOps and v0.2 reward formats", () => {
    const agentops = span({ id: "ao", parent: "root", seq: 3, attrs: { "agentops.task.output": '{"type":"reward","value":0.25}' } });
    const legacy = span({ id: "lg", parent: "root", seq: 5, name: sc.AGL_ANNOTATION, attrs: { reward: 0.75 } });
    const out = spansToTriplets([root, calls[0]!, agentops, calls[1]!, legacy]);
    expect(out.triplets.map((t) => t.reward)).toEqual([0.25, 0.75]);
  });
});

describe("samples", () => {
  it("are the agl.v1 messages themselves, with every field: ids from the spans, group and resources from the rollout", () => {
    const out = spansToTriplets(
      [
        root,
        llmSpan({ id: "a", parent: "root", seq: 2, prompt: [1], response: [2], responseId: "resp-a", model: "m-1" }),
        llmSpan({ id: "b", parent: "root", seq: 3, prompt: [3], response: [4], resources: ["rs-call", 2] }),
        rewardSpan({ id: "r", parent: "root", seq: 4, value: 0.5 }),
      ],
      {},
      { groupId: "g-1", resourcesId: "rs-rollout" },
    );
    expect(out.triplets.every((t) => isMessage(t, TripletSchema))).toBe(true);
    expect(isMessage(out.stats, TripletStatsSchema)).toBe(true);
    // Built as plain objects: exactly what `create()` makes of the same fields (no unset optional field present).
    for (const triplet of out.triplets) expect(triplet).toStrictEqual(createdAgain(TripletSchema, triplet));
    expect(out.stats).toStrictEqual(createdAgain(TripletStatsSchema, out.stats));
    expect(out.triplets[0]).toMatchObject({
      rolloutId: "ro-000000000001",
      attemptId: "at-00000001",
      groupId: "g-1",
      turnIndex: 0,
      turnCount: 1,
      finalReward: 0.5,
      resourcesId: "rs-rollout",
      resourcesVersion: 0,
      model: "m-1",
      spanIds: ["a"],
      responseId: "resp-a",
    });
    expect(out.triplets[0]?.reward).toBeUndefined();
    expect(out.triplets[1]).toMatchObject({ reward: 0.5, finalReward: 0.5, resourcesId: "rs-call", resourcesVersion: 2, responseId: "" });
  });

  it("transition mode: one sample per call with mask 1 and aligned logprobs (misaligned ones dropped, counted)", () => {
    const out = spansToTriplets([
      root,
      llmSpan({ id: "a", parent: "root", seq: 2, prompt: [1, 2], response: [3, 4], logprobs: [-0.1, -0.2], resources: ["rs-1", 3] }),
      llmSpan({ id: "b", parent: "root", seq: 3, prompt: [5], response: [6, 7], logprobs: [-0.3] }),
    ]);
    expect(out.triplets).toMatchObject([
      {
        turnIndex: 0,
        turnCount: 1,
        promptTokenIds: [1, 2],
        responseTokenIds: [3, 4],
        responseMask: [1, 1],
        logprobs: [-0.1, -0.2],
        resourcesId: "rs-1",
        resourcesVersion: 3,
      },
      { turnIndex: 1, promptTokenIds: [5], responseTokenIds: [6, 7], responseMask: [1, 1], logprobs: [] },
    ]);
    expect(out.stats.logprobMismatches).toBe(1);
  });

  it("trajectory mode: prefix-continuous calls merge, observations masked with logprob 0", () => {
    const out = spansToTriplets(
      [
        root,
        llmSpan({ id: "t1", parent: "root", seq: 2, prompt: [1, 2], response: [3, 4], logprobs: [-1, -2] }),
        llmSpan({ id: "t2", parent: "root", seq: 3, prompt: [1, 2, 3, 4, 50, 51], response: [5], logprobs: [-5] }),
        llmSpan({
          id: "t3",
          parent: "root",
          seq: 4,
          prompt: [1, 2, 3, 4, 50, 51, 5],
          response: [6, 7],
          logprobs: [-6, -7],
          responseId: "last",
        }),
        rewardSpan({ id: "r", parent: "root", seq: 5, value: 1 }),
      ],
      { mode: "trajectory" },
    );
    expect(out.triplets).toEqual([
      expect.objectContaining({
        turnIndex: 0,
        turnCount: 3,
        promptTokenIds: [1, 2],
        responseTokenIds: [3, 4, 50, 51, 5, 6, 7],
        responseMask: [1, 1, 0, 0, 1, 1, 1],
        logprobs: [-1, -2, 0, 0, -5, -6, -7],
        reward: 1,
        spanIds: ["t1", "t2", "t3"],
        responseId: "last",
      }),
    ]);
    expect(out.stats.mismatches).toEqual({});
  });

  it("trajectory mode: every kind of break starts a new sample and is counted", () => {
    const base = { parent: "root", response: [3, 4] };
    const out = spansToTriplets(
      [
        root,
        llmSpan({ ...base, id: "a", seq: 2, prompt: [1, 2] }),
        llmSpan({ ...base, id: "b", seq: 3, prompt: [1, 9, 3, 4, 5] }), // the earlier prompt was rewritten
        llmSpan({ ...base, id: "c", seq: 4, prompt: [1, 9, 3, 4, 5, 3, 8] }), // the previous answer was re-tokenized
        llmSpan({ ...base, id: "d", seq: 5, prompt: [1, 9, 3] }), // history truncated
        llmSpan({ ...base, id: "e", seq: 6, prompt: [1, 9, 3, 3, 4], model: "other" }),
        llmSpan({ ...base, id: "f", seq: 7, prompt: [1, 9, 3, 3, 4, 3, 4], model: "other", resources: ["rs-2", 1] }),
      ],
      { mode: "trajectory" },
    );
    expect(out.triplets.map((t) => t.spanIds)).toEqual([["a"], ["b"], ["c"], ["d"], ["e"], ["f"]]);
    expect(out.stats.mismatches).toEqual({
      prompt_changed: 1,
      response_changed: 1,
      context_truncated: 1,
      model_changed: 1,
      resources_changed: 1,
    });
  });
});
