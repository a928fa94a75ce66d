/**
 * StreamTriplets into Python: a store server (in this process, memory backend, TripletService registered) holds
 * finished rollouts with proxy-shaped LLM spans (three calls each, prompts growing turn by turn); a Python process
 * reads the whole stream through the generated stubs. Prints triplets/s and token ids/s, transition and trajectory,
 * with a TypeScript consumer (grpc-js) for comparison.
 *
 *   npx tsx bench/triplets/run.ts --rollouts 2000 --prompt 600 --response 60
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { promisify } from "node:util";
import { attr } from "../../src/adapter/attributes.js";
import * as sc from "../../src/core/semconv.js";
import { TripletMode } from "../../src/gen/agl/v1/triplets_pb.js";
import { AttemptStatus } from "../../src/gen/agl/v1/types_pb.js";
import { startStoreServer } from "../../src/server/store-server.js";
import { createMemoryBackend } from "../../src/store/backends/memory/memory-backend.js";
import { createStore } from "../../src/store/store.js";
import { createTripletClient } from "../../src/triplets/triplet-client.js";

const { values: args } = parseArgs({
  options: {
    rollouts: { type: "string", default: "2000" },
    prompt: { type: "string", default: "600" },
    response: { type: "string", default: "60" },
  },
});
const total = Number(args.rollouts);
const promptLength = Number(args.prompt);
const responseLength = Number(args.response);
const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

const store = createStore({ backend: createMemoryBackend(), watchdogIntervalSeconds: 0 });
const server = await startStoreServer({ store, port: 0 });

const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i * 31) % 150_000));
for (let done = 0; done < total; done += 200) {
  const n = Math.min(200, total - done);
  await store.enqueueRollouts({ rollouts: Array.from({ length: n }, () => ({ groupId: "bench" })) });
  const { rollouts } = await store.dequeueRollouts({ workerId: "bench", limit: n });
  for (const [k, r] of rollouts.entries()) {
    const attemptId = r.latestAttempt?.attemptId as string;
    let prompt = ids(promptLength, done + k);
    const spans = [];
    for (let turn = 0; turn < 3; turn++) {
      const response = ids(responseLength, (done + k) * 10 + turn);
      spans.push({
        rolloutId: r.rolloutId,
        attemptId,
        spanId: `c00000000000000${turn}`,
        name: "chat m",
        attributes: {
          [sc.AGL_LLM_SOURCE]: attr.string("proxy"),
          [sc.GEN_AI_RESPONSE_MODEL]: attr.string("m"),
          [sc.AGL_LLM_PROMPT_TOKEN_IDS]: attr.ints(prompt),
          [sc.AGL_LLM_RESPONSE_TOKEN_IDS]: attr.ints(response),
          [sc.AGL_LLM_LOGPROBS]: attr.doubles(response.map(() => -0.5)),
        },
      });
      prompt = [...prompt, ...response, ...ids(40, turn)];
    }
    spans.push({
      rolloutId: r.rolloutId,
      attemptId,
      spanId: "f000000000000000",
      name: sc.AGL_ANNOTATION,
      attributes: { [sc.rewardValueKey(0)]: attr.double(1) },
    });
    await store.updateAttempt({ rolloutId: r.rolloutId, attemptId, status: AttemptStatus.SUCCEEDED, spans });
  }
}

const python = `${repoRoot}python-bridge/.venv/bin/python`;
const address = new URL(server.url).host;
console.log(
  `${total} finished rollouts × 3 calls; prompts ${promptLength}→${promptLength + 2 * (responseLength + 40)} ids, responses ` +
    `${responseLength}`,
);
for (const [label, mode] of [
  ["transition", TripletMode.TRANSITION],
  ["trajectory", TripletMode.TRAJECTORY],
] as const) {
  const { stdout } = await promisify(execFile)(python, [`${repoRoot}bench/triplets/consume.py`, address, String(mode)], {
    cwd: `${repoRoot}python-bridge`,
    maxBuffer: 1 << 20,
  });
  const py = JSON.parse(stdout) as { rollouts: number; triplets: number; ids: number; seconds: number };
  const client = createTripletClient({ baseUrl: server.url });
  const start = performance.now();
  let triplets = 0;
  for await (const m of client.streamTriplets({ options: { mode } })) triplets += m.rollout?.triplets.length ?? 0;
  const tsSeconds = (performance.now() - start) / 1000;
  client.close();
  const rate = (n: number, s: number) =>
    Math.round(n / s)
      .toLocaleString("en-US")
      .padStart(9);
  console.log(
    `${label.padEnd(10)} python: ${rate(py.triplets, py.seconds)} triplets/s ${rate(py.ids, py.seconds)} ids/s ` +
      `${rate(py.rollouts, py.seconds)} rollouts/s` +
      `  | typescript: ${rate(triplets, tsSeconds)} triplets/s`,
  );
}
await server.close();
await store.close();
