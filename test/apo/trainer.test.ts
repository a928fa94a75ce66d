import { afterAll, beforeAll, expect, test } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { createApo } from "../../src/algorithm/apo/apo-algorithm.js";
import { Trainer } from "../../src/trainer/trainer.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { agentModule, agentPolicy, hintTasks, optimizerPolicy } from "./apo-harness.js";

let agentLlm: FakeLlmServer;
let optimizer: FakeLlmServer;
beforeAll(async () => {
  agentLlm = await startFakeLlmServer({ model: "agent-model", policy: agentPolicy });
  optimizer = await startFakeLlmServer({ model: "opt-model", policy: optimizerPolicy });
});
afterAll(async () => {
  await agentLlm.close();
  await optimizer.close();
});

test("APO runs as a Trainer algorithm: in-memory store, the agent module on worker threads", async () => {
  const report = await Trainer.dev(
    agentModule,
    { train: hintTasks(12), val: hintTasks(9, 100) },
    {
      workers: 2,
      concurrency: 4,
      logger: silentLogger,
      algorithm: createApo({
        templates: { prompt: "Answer this: {q}" },
        optimizer: { baseUrl: optimizer.url, gradientModel: "opt-model", editModel: "opt-model" },
        resources: { llm: { kind: { case: "llm", value: { endpoint: agentLlm.url, model: "agent-model" } } } },
        beamWidth: 2,
        branchFactor: 2,
        rounds: 2,
        gradientBatchSize: 3,
        valBatchSize: 4,
      }),
    },
  );
  expect(report.status).toBe("completed");
  expect(report.baseline).toBe(0);
  expect(report.best.score).toBeCloseTo(2 / 3, 10);
}, 60_000);
