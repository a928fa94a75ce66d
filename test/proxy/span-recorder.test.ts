/**
 * The LLM proxy's span recorder asking the store about attempts (`describe_attempt`) before their first calls: the
 * questions asked in one turn of the event loop go in one `AddSpans`, and a scope the store refuses fails only itself.
 * And the spans it writes are handed over: the store keeps their objects without copying them.
 */
import { afterEach, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import type { Span } from "../../src/gen/agl/v1/types_pb.js";
import type { CallRecord } from "../../src/proxy/call-span.js";
import { createScopeChecker } from "../../src/proxy/scope-check.js";
import { type CarriedOutcome, createSpanRecorder } from "../../src/proxy/span-recorder.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import type { AddSpansFrom } from "../../src/store/span-promises.js";
import { isHandedOver } from "../../src/store/span-wire.js";
import { createStore, type Store } from "../../src/store/store.js";
import { claimAttempt } from "../support/store-harness.js";

let store: Store;
afterEach(() => store?.close());

/** A recorder on a real store that counts the `AddSpans` calls it gets: their promises, and whether each failed. */
async function start() {
  store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
  const calls: { promises: number; failed: boolean }[] = [];
  const sent: Span[] = [];
  const addSpans: AddSpansFrom = async (request, options, holder) => {
    const call = { promises: request.expect?.length ?? 0, failed: false };
    calls.push(call);
    sent.push(...((request.spans ?? []) as Span[]));
    try {
      return await store.addSpans(request, options, holder);
    } catch (error) {
      call.failed = true;
      throw error;
    }
  };
  const counted = { ...store, addSpans };
  const recorder = createSpanRecorder({ store: counted, scopes: createScopeChecker(counted), logger: silentLogger });
  /** Describes the attempt with its first call's span promise, as the proxy does; the outcome is the promise's. */
  const describe = (scope: { rolloutId: string; attemptId: string }, spanId: string) => {
    let told!: (outcome: CarriedOutcome) => void;
    const outcome = new Promise<CarriedOutcome>((resolve) => (told = resolve));
    const described = recorder.describe(scope, { request: { ...scope, spanIds: [spanId] }, resolve: (o) => told(o) });
    return Promise.all([described, outcome]);
  };
  return { calls, sent, recorder, describe };
}

it("asks about the attempts of calls that start in one turn in one AddSpans, each answered with its own", async () => {
  const { calls, describe } = await start();
  const { resourcesId } = await store.addResources({ resources: {} });
  const attempts = [await claimAttempt(store), await claimAttempt(store), await claimAttempt(store)];
  const unknown = { rolloutId: attempts[0]!.rolloutId, attemptId: "at-ffffffff" };

  const answers = await Promise.all([...attempts, unknown].map((scope, i) => describe(scope, `s${i}`)));
  expect(calls).toEqual([{ promises: 4, failed: false }]);
  expect(answers.map(([a, outcome]) => [a?.rolloutExists, a?.attemptExists, a?.resourcesId, outcome])).toEqual([
    [true, true, resourcesId, "held"],
    [true, true, resourcesId, "held"],
    [true, true, resourcesId, "held"],
    [true, false, resourcesId, "held"],
  ]);

  // A question of a later turn goes in a call of its own.
  await describe(attempts[1]!, "s4");
  expect(calls).toHaveLength(2);
});

it("a scope the store refuses fails the shared question: each then goes alone, and only that one fails", async () => {
  const { calls, describe } = await start();
  const attempts = [await claimAttempt(store), await claimAttempt(store)];
  // An id longer than the store takes: the whole AddSpans is INVALID_ARGUMENT.
  const refused = { rolloutId: `ro-${"f".repeat(300)}`, attemptId: attempts[0]!.attemptId };

  const [first, bad, second] = (await Promise.all([attempts[0]!, refused, attempts[1]!].map((scope, i) => describe(scope, `s${i}`)))).map(
    ([attempt, outcome]) => [attempt?.attemptExists, outcome],
  );
  expect(calls).toEqual([
    { promises: 3, failed: true },
    { promises: 1, failed: false },
    { promises: 1, failed: true },
    { promises: 1, failed: false },
  ]);
  expect(first).toEqual([true, "held"]);
  expect(second).toEqual([true, "held"]);
  expect(bad).toEqual([undefined, "failed"]);
});

it("hands the spans it builds over to the store, which keeps them without a copy", async () => {
  const { sent, recorder } = await start();
  const scope = await claimAttempt(store);
  const call: CallRecord = {
    scope,
    kind: "chat",
    traceId: "ab".repeat(16),
    spanId: "cd".repeat(8),
    parentId: "",
    request: { model: "m", messages: [] },
    requestText: '{"model":"m","messages":[]}',
    api: "chat",
    clientRequestText: undefined,
    extraAttributes: undefined,
    stream: false,
    startTime: 1,
    endTime: 2,
    timeToFirstByteMs: 0.5,
    backendEndpoint: "http://127.0.0.1:1/v1",
    resourcesId: "",
    resourcesVersion: 0,
    tries: 1,
    httpStatus: 200,
    completion: undefined,
    error: undefined,
  };
  await recorder.record(call, true);

  expect(sent).toHaveLength(1);
  expect(isHandedOver(sent[0] as Span)).toBe(true);
  const { spans } = await store.querySpans({ rolloutId: scope.rolloutId });
  expect(spans.map((s) => s.spanId)).toEqual([call.spanId]);
  expect(spans[0]?.attributes).toBe(sent[0]?.attributes);
  expect(Object.isFrozen(spans[0]?.attributes)).toBe(true);
});
