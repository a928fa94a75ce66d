/**
 * Agents written with real SDKs in their default modes (OpenAI Agents JS and the AI SDK's `openai()` on the Responses
 * API, the AI SDK's Anthropic provider and `@anthropic-ai/sdk` streaming on Messages), run by `agl run` through the
 * LLM proxy against the loopback engine: every call becomes a triplet with exactly the ids the engine sampled, and the
 * two turns of each rollout merge into one trajectory, in chat mode and in token-in mode.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGL_LLM_TOKEN_IN, AGL_LLM_TOKEN_IN_FALLBACK } from "../../src/core/semconv.js";
import { type RolloutTriplets, TripletMode } from "../../src/gen/agl/v1/triplets_pb.js";
import { fromAttributeValue } from "../../src/tracer/attributes.js";
import type { Answer, PolicyInput, Reply } from "../support/fake-vllm.js";
import { runCli } from "../support/runner-process.js";
import { type ServedProxy, startServedProxy } from "../support/served-proxy.js";
import { jsonValue } from "../support/store-harness.js";

/** Calls `add` with the numbers of the question, then says the tool's result. */
function adderPolicy(input: PolicyInput): Reply {
  const last = input.messages.at(-1);
  if (last?.role === "tool") return { content: `The sum is ${String(last.content)}.` };
  const m = /(\d+) \+ (\d+)/.exec(input.promptText);
  if (!m || input.tools.length === 0) return { content: "I cannot tell." };
  return { content: "", toolCalls: [{ name: "add", arguments: { a: Number(m[1]), b: Number(m[2]) } }] };
}

let h: ServedProxy;
beforeAll(async () => {
  h = await startServedProxy({ engine: { policy: adderPolicy } });
});
afterAll(() => h?.close());

async function read(groupId: string, mode: TripletMode): Promise<RolloutTriplets[]> {
  const out: RolloutTriplets[] = [];
  for await (const m of h.triplets.streamTriplets({ groupId, options: { mode } })) if (m.rollout) out.push(m.rollout);
  return out;
}

const tasks = [
  { a: 2, b: 3 },
  { a: 40, b: 2 },
];

describe("real SDKs in their default modes, through agl run and the proxy", () => {
  const cases = [
    ...["agentsResponses", "aiSdkOpenai", "aiSdkAnthropic", "anthropicStream"].map((sdk) => ({ sdk, tokenIn: false })),
    // The same agents with their rollouts in token-in mode (`metadata.agl_token_in`).
    ...["agentsResponses", "anthropicStream"].map((sdk) => ({ sdk, tokenIn: true })),
  ];
  for (const { sdk, tokenIn } of cases) {
    const name = tokenIn ? `${sdk}, token-in` : sdk;
    it(`${name}: every call a triplet with the engine's exact ids, two turns merged into one trajectory`, async () => {
      const before = h.engine.answers.length;
      const groupId = name;
      const metadata: Record<string, boolean> = tokenIn ? { agl_token_in: true } : {};
      await h.client.enqueueRollouts({ rollouts: tasks.map((t) => ({ input: jsonValue(t), groupId, metadata })) });
      const run = await runCli([
        "run",
        "test/fixtures/sdk-agents.ts",
        ...["--export", sdk, "--store", h.server.url, "--max-rollouts", String(tasks.length), "--workers", "0", "--poll-wait", "0.3"],
      ]);
      expect(run.code, run.stderr).toBe(0);
      const answers = h.engine.answers.slice(before);
      expect(answers).toHaveLength(2 * tasks.length);
      const byId = new Map<string, Answer>(answers.map((a) => [a.responseId, a]));

      const transition = await read(groupId, TripletMode.TRANSITION);
      expect(transition.map((r) => r.finalReward)).toEqual([1, 1]);
      const all = transition.flatMap((r) => r.triplets);
      expect(all).toHaveLength(2 * tasks.length);
      for (const t of all) {
        const sent = byId.get(t.responseId) as Answer;
        expect([t.promptTokenIds, t.responseTokenIds, t.logprobs]).toEqual([sent.promptIds, sent.responseIds, sent.logprobs]);
      }
      const trajectory = await read(groupId, TripletMode.TRAJECTORY);
      expect(trajectory.map((r) => r.triplets.map((t) => t.turnCount))).toEqual([[2], [2]]);
      for (const r of trajectory) {
        const [first, second] = answers.filter((a) =>
          transition.find((x) => x.rolloutId === r.rolloutId)?.triplets.some((t) => t.responseId === a.responseId),
        );
        const t = r.triplets[0]!;
        const { spans } = await h.client.querySpans({ rolloutId: r.rolloutId });
        const modes = spans.map((s) => s.attributes[AGL_LLM_TOKEN_IN]).filter((v) => v !== undefined);
        const reasons = spans.map((s) => s.attributes[AGL_LLM_TOKEN_IN_FALLBACK]).filter((v) => v !== undefined);
        expect(
          modes.map((v) => fromAttributeValue(v)),
          `fallback reasons: ${reasons.map((v) => fromAttributeValue(v)).join(", ")}`,
        ).toEqual(tokenIn ? ["first", "extended"] : []);
        // The merged sample: the first prompt, then both answers and the tool turn between them.
        expect(t.promptTokenIds).toEqual(first?.promptIds);
        expect(t.responseTokenIds).toEqual([
          ...(first?.responseIds ?? []),
          ...(second?.promptIds.slice((first?.promptIds.length ?? 0) + (first?.responseIds.length ?? 0)) ?? []),
          ...(second?.responseIds ?? []),
        ]);
      }
    }, 60_000);
  }
});
