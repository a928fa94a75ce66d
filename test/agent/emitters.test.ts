/** Emitters and reward post-processing: span names and attribute keys of the reference (§6.4), in the attempt. */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AglError } from "../../src/core/errors.js";
import { emitAnnotation, emitException, emitMessage, emitObject, linkAttributes, tagAttributes } from "../../src/emitter/emitters.js";
import { emitReward } from "../../src/emitter/reward.js";
import { type Span, SpanSchema, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { fromAttributeValue } from "../../src/tracer/attributes.js";
import { runAttempt } from "../support/attempt-harness.js";

const attrs = (span: Span | undefined) =>
  Object.fromEntries(Object.entries(span?.attributes ?? {}).map(([k, v]) => [k, fromAttributeValue(v)]));
const named = (spans: Span[], name: string) => spans.filter((s) => s.name === name);

describe("emitters", () => {
  it("write reward, message, object, exception and annotation spans under the attempt's root span", async () => {
    const { outcome, spans, task } = await runAttempt(async () => {
      emitReward(0.25);
      emitReward(
        { accuracy: 1, brevity: 0.5 },
        { primaryKey: "brevity", feedback: "short but vague", attributes: { judge: { model: "m" } } },
      );
      emitMessage("thinking…");
      emitObject({ plan: ["a", "b"] });
      emitObject(7);
      emitObject(new Uint8Array([1, 2, 3]));
      emitException(new RangeError("out of range"));
      // A key named `__proto__` (as JSON.parse makes one) is an attribute like any other.
      const proto = JSON.parse('{"__proto__": "kept"}');
      emitAnnotation({
        step: 3,
        ...proto,
        nested: { ok: true, ...proto, ids: [1, 2] },
        ...linkAttributes({ span_id: "abc" }),
        ...tagAttributes(["x", "y"]),
      });
    });
    expect(outcome.end).toBe("succeeded");
    const root = spans.find((s) => s.name === "agentlightning.rollout");
    expect(attrs(root)).toMatchObject({ "agentlightning.rollout_id": task.rolloutId, "agentlightning.attempt_id": task.attemptId });
    for (const span of spans.filter((s) => s !== root)) {
      expect(span.parentId).toBe(root?.spanId);
      expect(span.traceId).toBe(root?.traceId);
      expect([span.rolloutId, span.attemptId]).toEqual([task.rolloutId, task.attemptId]);
    }
    const [single, multi, annotation] = named(spans, "agentlightning.annotation");
    expect(attrs(single)).toEqual({ "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.25 });
    expect(multi?.attributes["agentlightning.reward.0.value"]?.value).toEqual({ case: "doubleValue", value: 0.5 });
    expect(attrs(multi)).toEqual({
      "agentlightning.reward.0.name": "brevity",
      "agentlightning.reward.0.value": 0.5,
      "agentlightning.reward.1.name": "accuracy",
      "agentlightning.reward.1.value": 1,
      "agentlightning.reward.feedback": "short but vague",
      "judge.model": "m",
    });
    // A whole-number reward stays a double.
    expect(multi?.attributes["agentlightning.reward.1.value"]?.value.case).toBe("doubleValue");
    expect(attrs(annotation)).toEqual({
      step: 3,
      ["__proto__"]: "kept",
      "nested.ok": true,
      "nested.__proto__": "kept",
      "nested.ids": [1, 2],
      "agentlightning.link.0.key_match": "span_id",
      "agentlightning.link.0.value_match": "abc",
      "agentlightning.tag.0": "x",
      "agentlightning.tag.1": "y",
    });
    const [message] = named(spans, "agentlightning.message");
    expect(attrs(message)).toEqual({ "agentlightning.message.body": "thinking…" });
    expect(message?.status?.code).toBe(StatusCode.UNSET);
    expect(named(spans, "agentlightning.object").map(attrs)).toEqual([
      { "agentlightning.object.type": "Object", "agentlightning.object.json": '{"plan":["a","b"]}' },
      { "agentlightning.object.type": "number", "agentlightning.object.literal": "7" },
      { "agentlightning.object.type": "bytes", "agentlightning.object.literal": "AQID" },
    ]);
    const exception = attrs(named(spans, "agentlightning.exception")[0]);
    expect(exception).toMatchObject({ "exception.type": "RangeError", "exception.message": "out of range", "exception.escaped": true });
    expect(String(exception["exception.stacktrace"])).toContain("RangeError: out of range");
  });

  it("reject bad rewards and calls outside a rollout, unless asked only to build the span", () => {
    expect(() => emitReward(1)).toThrow(expect.objectContaining({ code: "no_active_attempt" }));
    expect(() => emitReward({ a: 1 } as never, { propagate: false })).toThrow(/needs options.primaryKey/);
    expect(() => emitReward({ a: 1 }, { primaryKey: "b", propagate: false })).toThrow(
      'primaryKey "b" is not a dimension of the reward (a)',
    );
    expect(() => emitReward({ a: "x" } as never, { primaryKey: "a", propagate: false })).toThrow(/"a" must be a finite number/);
    expect(() => emitReward(Number.NaN, { propagate: false })).toThrow(AglError);
    expect(() => emitMessage(3 as never, { propagate: false })).toThrow(/takes a string/);
    expect(() => emitException("nope" as never, { propagate: false })).toThrow(/takes an Error/);
    expect(() => emitObject(10n ** 2n, { propagate: false })).not.toThrow();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => emitObject(cyclic, { propagate: false })).toThrow(/JSON-serializable/);
    const fields = emitReward(0.5, { propagate: false });
    expect(fields).toMatchObject({ name: "agentlightning.annotation", status: { code: "ok" } });
  });
});

describe("what a rollout returns", () => {
  const rewardsOf = (spans: Span[]) =>
    named(spans, "agentlightning.annotation").map((s) => fromAttributeValue(s.attributes["agentlightning.reward.0.value"]));

  it("a number becomes a reward span; a boolean counts as 1 or 0; nothing records nothing", async () => {
    expect(rewardsOf((await runAttempt(() => 0.75)).spans)).toEqual([0.75]);
    expect(rewardsOf((await runAttempt(() => true)).spans)).toEqual([1]);
    expect(rewardsOf((await runAttempt(() => false)).spans)).toEqual([0]);
    const { spans, outcome } = await runAttempt(async () => undefined);
    expect(outcome.end).toBe("succeeded");
    expect(spans.map((s) => s.name)).toEqual(["agentlightning.rollout"]);
  });

  it("an array of spans is recorded, without recording twice what the attempt already has", async () => {
    const { spans } = await runAttempt(() => [
      emitReward(0.2, { propagate: false }),
      emitReward(0.6, { propagate: false }),
      create(SpanSchema, { name: "custom", spanId: "00000000000000aa" }),
    ]);
    expect(rewardsOf(spans)).toEqual([0.2, 0.6]);
    expect(named(spans, "custom")).toHaveLength(1);
    expect(named(spans, "custom")[0]?.rolloutId).toMatch(/^ro-/);
    const again = await runAttempt(() => [emitReward(0.9)]);
    expect(rewardsOf(again.spans)).toEqual([0.9]);
  });

  it("anything else fails the attempt with an error that says what was expected", async () => {
    const { outcome, spans } = await runAttempt(() => ({ reward: 1 }) as never);
    expect(outcome.end).toBe("failed");
    expect(outcome.error).toMatchObject({
      type: "AglError",
      message: expect.stringContaining("must return a number (the reward), nothing, or an array of spans"),
    });
    const root = spans.find((s) => s.name === "agentlightning.rollout");
    expect(root?.status?.code).toBe(StatusCode.ERROR);
    expect(root?.events.map((e) => e.name)).toEqual(["exception"]);
  });
});
