/**
 * `make demo`'s agent (examples/rl-kind/agent.ts: the openai client with `createTracingFetch`, through the LLM proxy)
 * records each call twice, the proxy's span and the client's, both with the engine's token ids. The dashboard's
 * aggregate (GetRewardsByResources) counts each call once, with its tokens once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGL_LLM_RESPONSE_TOKEN_IDS } from "../../src/core/semconv.js";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { createInProcessExecutor } from "../../src/runner/in-process-executor.js";
import { createRunner } from "../../src/runner/runner.js";
import { type ServedProxy, startServedProxy } from "../support/served-proxy.js";
import { jsonValue, waitFinished } from "../support/store-harness.js";
import kindAgent from "../../examples/rl-kind/agent.js";
import { silentLogger } from "../../src/core/logger.js";

let h: ServedProxy;
beforeAll(async () => {
  h = await startServedProxy({ engine: { policy: () => ({ content: "fox animal" }) } });
});
afterAll(() => h?.close());

describe("LLM calls counted by the dashboard's aggregate", () => {
  it("counts a call the proxy and the client both recorded once", async () => {
    const tasks = [
      { word: "fox", answer: "animal" },
      { word: "red", answer: "color" },
      { word: "six", answer: "number" },
    ];
    const { rollouts } = await h.client.enqueueRollouts({ rollouts: tasks.map((t) => ({ input: jsonValue(t) })) });
    const runner = createRunner({
      store: h.client,
      executor: createInProcessExecutor({ agent: kindAgent, concurrency: 3, logger: silentLogger }),
      maxRollouts: tasks.length,
      pollWaitSeconds: 0.3,
      logger: silentLogger,
    });
    await runner.run();
    const ids = rollouts.map((r) => r.rolloutId);
    const finished = await waitFinished(h.client, ids);
    expect(finished.map((r) => r.status)).toEqual(ids.map(() => RolloutStatus.SUCCEEDED));

    // Two records of each call, both with the token ids.
    for (const rolloutId of ids) {
      const { spans } = await h.client.querySpans({ rolloutId });
      expect(spans.filter((s) => s.attributes[AGL_LLM_RESPONSE_TOKEN_IDS] !== undefined)).toHaveLength(2);
    }
    const answers = h.engine.answers;
    expect(answers).toHaveLength(tasks.length);
    const { stats } = await h.client.getRewardsByResources({});
    expect(stats.map((s) => [s.rollouts, s.llmCalls, Number(s.promptTokens), Number(s.responseTokens)])).toEqual([
      [
        tasks.length,
        tasks.length,
        answers.reduce((sum, a) => sum + a.promptIds.length, 0),
        answers.reduce((sum, a) => sum + a.responseIds.length, 0),
      ],
    ]);
  });
});
