/**
 * Adapter throughput: spans → triplets, in process, for a realistic agent trace: per rollout one agent span, three
 * proxy LLM calls whose prompts grow turn by turn (prefix-continuous: trajectory mode merges them), three tool spans,
 * two message spans and a reward span — ten spans, as protobuf messages the way the store returns them.
 * Prints spans/s and LLM-call spans/s for transition and trajectory mode (target ≥ 100,000 spans/s).
 *
 *   npx tsx bench/adapter/run.ts --rollouts 5000 --prompt 600 --response 60
 */
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { spansToTriplets, type TripletAdapterOptions } from "../../src/adapter/spans-to-triplets.js";
import { type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";

const { values: args } = parseArgs({
  options: {
    rollouts: { type: "string", default: "5000" },
    prompt: { type: "string", default: "600" },
    response: { type: "string", default: "60" },
    observation: { type: "string", default: "40" },
    rounds: { type: "string", default: "5" },
  },
});
const rollouts = Number(args.rollouts);
const promptLength = Number(args.prompt);
const responseLength = Number(args.response);
const observationLength = Number(args.observation);

const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 31) % 150_000));

function trace(r: number): Span[] {
  const base = { rolloutId: `ro-${r.toString(16).padStart(12, "0")}`, attemptId: "at-00000001", traceId: "ab".repeat(16) };
  let seq = 0;
  const span = (spanId: string, parentId: string, name: string, attributes: Span["attributes"]) =>
    create(SpanSchema, { ...base, sequenceId: ++seq, spanId, parentId, name, attributes, startTime: seq, endTime: seq + 0.5 });
  const spans = [
    span("a000000000000000", "", "invoke_agent solver", {
      [sc.GEN_AI_OPERATION_NAME]: attr.string("invoke_agent"),
      [sc.GEN_AI_AGENT_NAME]: attr.string("solver"),
    }),
  ];
  let prompt = ids(promptLength, r);
  for (let turn = 0; turn < 3; turn++) {
    const response = ids(responseLength, r * 10 + turn);
    spans.push(
      span(`c00000000000000${turn}`, "a000000000000000", "chat m", {
        [sc.AGL_LLM_SOURCE]: attr.string("proxy"),
        [sc.GEN_AI_OPERATION_NAME]: attr.string("chat"),
        [sc.GEN_AI_RESPONSE_MODEL]: attr.string("m"),
        [sc.GEN_AI_RESPONSE_ID]: attr.string(`chatcmpl-${r}-${turn}`),
        [sc.AGL_LLM_PROMPT_TOKEN_IDS]: attr.ints(prompt),
        [sc.AGL_LLM_RESPONSE_TOKEN_IDS]: attr.ints(response),
        [sc.AGL_LLM_LOGPROBS]: attr.doubles(response.map((_, i) => -i / 100)),
      }),
      span(`d00000000000000${turn}`, "a000000000000000", "execute_tool add", { [sc.GEN_AI_OPERATION_NAME]: attr.string("execute_tool") }),
    );
    prompt = [...prompt, ...response, ...ids(observationLength, r + turn)];
  }
  spans.push(span("e000000000000000", "a000000000000000", sc.AGL_MESSAGE, { [sc.AGL_MESSAGE_BODY]: attr.string("thinking") }));
  spans.push(span("e000000000000001", "a000000000000000", sc.AGL_MESSAGE, { [sc.AGL_MESSAGE_BODY]: attr.string("done") }));
  spans.push(span("f000000000000000", "a000000000000000", sc.AGL_ANNOTATION, { [sc.rewardValueKey(0)]: attr.double(1) }));
  return spans;
}

const traces = Array.from({ length: rollouts }, (_, r) => trace(r));
const spanCount = traces.reduce((n, t) => n + t.length, 0);
const callCount = rollouts * 3;

function measure(label: string, options: TripletAdapterOptions) {
  let best = Number.POSITIVE_INFINITY;
  let triplets = 0;
  for (let round = 0; round < Number(args.rounds); round++) {
    const start = performance.now();
    triplets = 0;
    for (const spans of traces) triplets += spansToTriplets(spans, options).triplets.length;
    best = Math.min(best, performance.now() - start);
  }
  const seconds = best / 1000;
  const rate = (count: number, width: number) =>
    Math.round(count / seconds)
      .toLocaleString("en-US")
      .padStart(width);
  console.log(
    `${label.padEnd(34)} ${rate(spanCount, 10)} spans/s  ${rate(callCount, 9)} LLM calls/s  ${rate(rollouts, 8)} rollouts/s  ` +
      `(${triplets} triplets)`,
  );
}

console.log(
  `${rollouts} rollouts × ${spanCount / rollouts} spans; prompts ` +
    `${promptLength}→${promptLength + 2 * (responseLength + observationLength)} ids, responses ${responseLength}; best of ${args.rounds}`,
);
measure("transition", { mode: "transition" });
measure("trajectory", { mode: "trajectory" });
measure("transition, no hierarchy repair", { mode: "transition", repairHierarchy: false });
