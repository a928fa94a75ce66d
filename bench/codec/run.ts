/**
 * What decoding and encoding one message cost: protobuf-es's `fromBinary` and `toBinary` against agl's generated
 * decoder and encoder (src/encoding/generated-decoder.ts, generated-encoder.ts), on the messages the store handles
 * most: a rollout with its latest attempt, an attempt, a worker carrying the runner pool's heartbeat stats, an
 * `AddSpans` of one recorded LLM call (~900 token ids, their logprobs, the bodies), and a span of two dozen short
 * attributes (the names every recorded LLM call repeats). Strings are encoded with Node's `Buffer` as in agl's
 * processes. The four codecs run in alternating batches; each figure is the median of the batches, in µs a message.
 *
 *   npx tsx bench/codec/run.ts [--batches 15] [--batch-ms 200]
 */
import { create, type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { parseArgs } from "node:util";
import { median } from "../stats.js";
import { attr } from "../../src/adapter/attributes.js";
import { decodeMessage } from "../../src/encoding/generated-decoder.js";
import { encodeMessage } from "../../src/encoding/generated-encoder.js";
import { useNodeTextEncoding } from "../../src/encoding/node-text-encoding.js";
import { AddSpansRequestSchema } from "../../src/gen/agl/v1/store_pb.js";
import {
  AttemptSchema,
  AttemptStatus,
  RolloutMode,
  RolloutSchema,
  RolloutStatus,
  SpanSchema,
  WorkerSchema,
  WorkerStatus,
} from "../../src/gen/agl/v1/types_pb.js";

const { values: args } = parseArgs({
  options: { batches: { type: "string", default: "15" }, "batch-ms": { type: "string", default: "200" } },
});
const batches = Number(args.batches);
useNodeTextEncoding();
const batchMs = Number(args["batch-ms"]);

const attempt = create(AttemptSchema, {
  rolloutId: "ro-5f0c1a2b3c4d",
  attemptId: "at-5f0c1a2b3c4d",
  sequenceId: 1,
  startTime: 1764800000.123,
  status: AttemptStatus.RUNNING,
  workerId: "worker-17",
  lastHeartbeatTime: 1764800003.5,
  metadata: { host: "node-3", pid: 4242 },
});
const rollout = create(RolloutSchema, {
  rolloutId: attempt.rolloutId,
  input: { kind: { case: "structValue", value: { fields: { question: { kind: { case: "stringValue", value: "What is 17 + 25?" } } } } } },
  startTime: 1764800000.1,
  mode: RolloutMode.TRAIN,
  resourcesId: "rs-000000000007",
  status: RolloutStatus.RUNNING,
  config: { maxAttempts: 2, timeoutSeconds: 60, unresponsiveSeconds: 30 },
  metadata: { step: 12, split: "train" },
  latestAttempt: attempt,
  resourcesVersion: 7,
});
const heartbeatStats: Record<string, number | string | boolean> = {};
for (let i = 0; i < 20; i++) heartbeatStats[`stat_${i}`] = i % 3 === 0 ? `value-${i}` : i % 3 === 1 ? i * 1.5 : i % 2 === 0;
const worker = create(WorkerSchema, {
  workerId: "worker-17",
  status: WorkerStatus.BUSY,
  heartbeatStats,
  lastHeartbeatTime: 1764800003.5,
  lastDequeueTime: 1764800000.1,
  currentRolloutId: attempt.rolloutId,
  currentAttemptId: attempt.attemptId,
});
const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => (i * 7919 + seed) % 262_144);
const body = (n: number) => JSON.stringify({ messages: [{ role: "user", content: "x".repeat(n) }] });
const span = create(SpanSchema, {
  rolloutId: attempt.rolloutId,
  attemptId: attempt.attemptId,
  traceId: "0123456789abcdef0123456789abcdef",
  spanId: "0123456789abcdef",
  name: "chat.completion",
  startTime: 1764800001.25,
  endTime: 1764800001.75,
  attributes: {
    "gen_ai.request.model": attr.string("gemma-3-270m"),
    "gen_ai.usage.prompt_tokens": attr.int(300),
    "gen_ai.usage.completion_tokens": attr.int(600),
    "agl.prompt_token_ids": attr.ints(ids(300, 1)),
    "agl.response_token_ids": attr.ints(ids(600, 2)),
    "agl.response_logprobs": attr.doubles(ids(600, 3).map((v) => -v / 262_144)),
    "agl.request_body": attr.string(body(1500)),
    "agl.response_body": attr.string(body(2500)),
  },
});
const addSpans = create(AddSpansRequestSchema, { spans: [span], id: 1 });
// A span as the demo's agent records its LLM call: two dozen short attributes, the names every such span repeats.
const namedSpan = create(SpanSchema, {
  ...span,
  attributes: Object.fromEntries(
    [
      "agl.llm.source",
      "gen_ai.operation.name",
      "gen_ai.provider.name",
      "gen_ai.system",
      "agl.llm.stream",
      "gen_ai.request.model",
      "gen_ai.request.temperature",
      "gen_ai.request.max_tokens",
      "agl.llm.http_status",
      "agl.llm.time_to_first_byte_ms",
      "gen_ai.response.id",
      "gen_ai.response.model",
      "gen_ai.response.finish_reasons",
      "gen_ai.usage.input_tokens",
      "gen_ai.usage.output_tokens",
      "agl.llm.latency_ms",
      "agl.llm.resources_id",
      "agl.llm.resources_version",
      "agl.llm.upstream_tries",
      "agl.llm.backend",
      "agl.llm.api",
      "agentlightning.rollout_id",
      "agentlightning.attempt_id",
      "agent.name",
    ].map((name, i) => [name, i % 2 === 0 ? attr.string(`value-${i}`) : attr.double(i * 1.5)]),
  ),
});

/** Runs `fn` for about `batchMs`, and gives its µs a call. */
function batch(fn: () => unknown): number {
  let calls = 0;
  const start = performance.now();
  let now = start;
  while (now - start < batchMs) {
    for (let i = 0; i < 50; i++) fn();
    calls += 50;
    now = performance.now();
  }
  return ((now - start) * 1000) / calls;
}

function measure<Desc extends DescMessage>(name: string, schema: Desc, message: MessageShape<Desc>) {
  const bytes = toBinary(schema, message);
  if (Buffer.compare(encodeMessage(schema, message), bytes) !== 0) throw new Error(`${name}: the encoders differ`);
  const codecs = {
    fromBinary: () => fromBinary(schema, bytes),
    decodeMessage: () => decodeMessage(schema, bytes),
    toBinary: () => toBinary(schema, message),
    encodeMessage: () => encodeMessage(schema, message),
  };
  const timings = Object.fromEntries(Object.keys(codecs).map((k) => [k, [] as number[]])) as Record<keyof typeof codecs, number[]>;
  for (let i = 0; i < batches; i++) for (const [k, fn] of Object.entries(codecs)) timings[k as keyof typeof codecs].push(batch(fn));
  const [from, decoded, to, encoded] = Object.values(timings).map(median) as [number, number, number, number];
  const cells = [from, decoded, `${(from / decoded).toFixed(2)}×`, to, encoded, `${(to / encoded).toFixed(2)}×`];
  console.log(`| ${name} | ${bytes.byteLength} | ${cells.map((c) => (typeof c === "number" ? c.toFixed(2) : c)).join(" | ")} |`);
}

console.log(`node ${process.version}, ${batches} batches of ${batchMs} ms each, alternating; µs a message, median`);
console.log("| message | bytes | fromBinary | generated | faster | toBinary | generated | faster |");
console.log("|---|---|---|---|---|---|---|---|");
measure("rollout, with its latest attempt", RolloutSchema, rollout);
measure("attempt", AttemptSchema, attempt);
measure("worker, 20 heartbeat stats", WorkerSchema, worker);
measure("AddSpans, one LLM call (900 token ids)", AddSpansRequestSchema, addSpans);
measure("span, 24 short attributes", SpanSchema, namedSpan);
