/**
 * Fills a SQLite store for the dashboard bench through the store's own API, in process: `count` rollouts enqueued in
 * batches, claimed in batches and finished (most succeeded with a reward span, some failed; the last few left queued),
 * across a few versions of one resources snapshot; plus one rollout of `spans` spans as an agent with many LLM calls
 * writes them (LLM-call spans built by the proxy's own `callSpan`, tool spans under them, reward spans).
 */
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { AttemptStatus, RolloutMode, type Span, SpanSchema, StatusCode } from "../../src/gen/agl/v1/types_pb.js";
import { callSpan } from "../../src/proxy/call-span.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore, type Store } from "../../src/store/store.js";

export interface FillOptions {
  path: string;
  count: number;
  spans: number;
  log?: (line: string) => void;
}

export interface FilledStore {
  /** The rollout with `spans` spans. */
  bigRolloutId: string;
}

const BATCH = 1_000;
const json = (value: JsonValue) => fromJson(ValueSchema, value);
const RESOURCES = "bench-policy";
const VERSIONS = 10;
const UNFINISHED = 200;

function rewardSpan(rolloutId: string, attemptId: string, spanId: string, value: number, start: number): Span {
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    traceId: `${rolloutId.slice(3).padEnd(32, "0")}`,
    spanId,
    name: sc.AGL_ANNOTATION,
    status: { code: StatusCode.OK },
    attributes: { [sc.rewardNameKey(0)]: attr.string("primary"), [sc.rewardValueKey(0)]: attr.double(value) },
    startTime: start,
    endTime: start,
  });
}

async function publish(store: Store, version: number): Promise<void> {
  await store.updateResources({
    resourcesId: RESOURCES,
    createIfMissing: true,
    resources: {
      main_llm: { kind: { case: "proxyLlm", value: { endpoint: "http://127.0.0.1:4747/v1", model: `policy-step-${version}` } } },
    },
  });
}

async function fillRollouts(store: Store, count: number, log: (line: string) => void): Promise<void> {
  const perVersion = Math.ceil(count / VERSIONS);
  let made = 0;
  for (let version = 1; made < count; version++) {
    await publish(store, version);
    const target = Math.min(count, made + perVersion);
    while (made < target) {
      const n = Math.min(BATCH, target - made);
      const first = made;
      await store.enqueueRollouts({
        rollouts: Array.from({ length: n }, (_, i) => ({
          input: json({ question: `What is ${first + i} + 1?`, answer: first + i + 1 }),
          mode: (first + i) % 5 === 4 ? RolloutMode.VAL : RolloutMode.TRAIN,
          resourcesId: RESOURCES,
          groupId: `group-${Math.floor((first + i) / 8)}`,
        })),
      });
      made += n;
      // Everything but the last few is claimed and finished.
      const claim = Math.min(n, count - UNFINISHED - first);
      if (claim <= 0) continue;
      const { rollouts } = await store.dequeueRollouts({ limit: claim, workerId: "bench-worker" });
      const now = Date.now() / 1000;
      for (const [i, r] of rollouts.entries()) {
        const attemptId = r.latestAttempt?.attemptId as string;
        const failed = (first + i) % 10 === 9;
        await store.updateAttempt({
          rolloutId: r.rolloutId,
          attemptId,
          status: failed ? AttemptStatus.FAILED : AttemptStatus.SUCCEEDED,
          spans: failed
            ? []
            : [rewardSpan(r.rolloutId, attemptId, `${(first + i).toString(16).padStart(16, "0")}`, ((first + i) % 7) / 6, now)],
        });
      }
    }
    log(`  ${made} rollouts`);
  }
}

/** One rollout of an agent that makes many LLM calls, each with a tool call under it, and reports rewards. */
async function fillBigRollout(store: Store, spans: number): Promise<string> {
  // Started directly (not through the queue, which still holds the unfinished rollouts).
  const started = await store.startRollout({
    rollout: { input: json({ question: "a long episode" }), resourcesId: RESOURCES },
    workerId: "bench-worker",
  });
  const rolloutId = started.rolloutId;
  const attemptId = started.latestAttempt?.attemptId as string;
  const traceId = "b".repeat(32);
  const rootId = "a".repeat(16);
  const t0 = Date.now() / 1000 - spans;
  const out: Span[] = [
    create(SpanSchema, {
      rolloutId,
      attemptId,
      traceId,
      spanId: rootId,
      name: "agent",
      status: { code: StatusCode.OK },
      startTime: t0,
      endTime: t0 + spans,
    }),
  ];
  const hex = (n: number) => n.toString(16).padStart(16, "0");
  for (let call = 0; out.length < spans - 1; call++) {
    const start = t0 + call * 3;
    const promptIds = Array.from({ length: 200 + call }, (_, i) => (i * 31 + call) % 50_000);
    const responseIds = Array.from({ length: 40 }, (_, i) => (i * 17 + call) % 50_000);
    const messages = [
      { role: "system", content: "Solve the task with the tools you have." },
      { role: "user", content: `Step ${call}: what next?` },
    ];
    const llm = callSpan({
      scope: { rolloutId, attemptId },
      kind: "chat",
      traceId,
      spanId: hex(2 * call + 1),
      parentId: rootId,
      request: { model: "policy", messages },
      requestText: JSON.stringify({ model: "policy", messages }),
      stream: false,
      startTime: start,
      endTime: start + 1.5,
      timeToFirstByteMs: 120,
      backendEndpoint: "http://127.0.0.1:8000/v1",
      resourcesId: RESOURCES,
      resourcesVersion: VERSIONS,
      tries: 1,
      httpStatus: 200,
      completion: {
        promptIds,
        responseIds,
        logprobs: responseIds.map((_, i) => -0.01 * ((i % 9) + 1)),
        responseId: `chatcmpl-${call}`,
        model: "policy",
        finishReasons: ["stop"],
        inputTokens: promptIds.length,
        outputTokens: responseIds.length,
        body: { id: `chatcmpl-${call}`, choices: [{ index: 0, message: { role: "assistant", content: `I will use tool ${call % 4}.` } }] },
      },
      error: undefined,
    });
    out.push(llm);
    out.push(
      create(SpanSchema, {
        rolloutId,
        attemptId,
        traceId,
        spanId: hex(2 * call + 2),
        parentId: rootId,
        name: `tool lookup-${call % 4}`,
        status: { code: StatusCode.OK },
        attributes: { "tool.name": attr.string(`lookup-${call % 4}`) },
        startTime: start + 1.5,
        endTime: start + 2.5,
      }),
    );
  }
  for (let i = 0; i < out.length; i += 100) await store.addSpans({ spans: out.slice(i, i + 100) });
  await store.updateAttempt({
    rolloutId,
    attemptId,
    status: AttemptStatus.SUCCEEDED,
    spans: [rewardSpan(rolloutId, attemptId, "f".repeat(16), 0.75, t0 + spans)],
  });
  return rolloutId;
}

export async function fillStore(options: FillOptions): Promise<FilledStore> {
  const log = options.log ?? (() => {});
  const store = createStore({ backend: createSqliteBackend({ path: options.path }), watchdogIntervalSeconds: 0 });
  try {
    await fillRollouts(store, options.count, log);
    return { bigRolloutId: await fillBigRollout(store, options.spans) };
  } finally {
    await store.close();
  }
}
