import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AglError } from "../../src/core/errors.js";
import type { ApoOptions } from "../../src/algorithm/apo/apo-options.js";
import { runApo } from "../../src/algorithm/apo/apo.js";
import { resolveApoOptions } from "../../src/algorithm/apo/resolve-options.js";
import { type ApoHarness, hintTasks, startApoHarness } from "./apo-harness.js";

let h: ApoHarness;
let closedUrl: string;
beforeAll(async () => {
  h = await startApoHarness();
  // A loopback port nobody listens on.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  closedUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/v1`;
  await new Promise((resolve) => probe.close(resolve));
});
afterAll(() => h.close());

const search = (runId: string, extra: Partial<ApoOptions> = {}): ApoOptions => ({
  ...h.base(),
  runId,
  templates: { prompt: "Answer this: {q}" },
  train: hintTasks(6),
  val: hintTasks(3, 100),
  beamWidth: 1,
  branchFactor: 1,
  rounds: 1,
  gradientBatchSize: 2,
  valBatchSize: 2,
  ...extra,
});

const failure = async (options: ApoOptions): Promise<AglError> => {
  try {
    await runApo(options);
  } catch (error) {
    expect(error).toBeInstanceOf(AglError);
    return error as AglError;
  }
  throw new Error("the run did not fail");
};

const nothingRan = async (runId: string) => {
  const { rollouts } = await h.store.client.queryRollouts({});
  expect(rollouts.filter((r) => r.metadata?.apo_run === runId)).toEqual([]);
};

describe("clear errors", { timeout: 60_000 }, () => {
  test("an optimizer endpoint nobody listens on fails before any rollout", async () => {
    const error = await failure(search("dead", { optimizer: { baseUrl: closedUrl } }));
    expect(error.code).toBe("optimizer_unreachable");
    expect(error.message).toContain(`cannot reach the optimizer LLM at ${closedUrl}`);
    expect(error.message).toContain("ECONNREFUSED");
    expect(error.message).toContain("--optimizer-base-url");
    await nothingRan("dead");
  });

  test("an endpoint that refuses the key fails before any rollout", async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "Incorrect API key provided" } }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    try {
      const error = await failure(search("badkey", { optimizer: { baseUrl: url, apiKey: "sk-wrong" } }));
      expect(error.code).toBe("optimizer_failed");
      expect(error.message).toMatch(/refused the API key \(401\).*OPENAI_API_KEY/);
      await nothingRan("badkey");
    } finally {
      server.close();
    }
  });

  test("a model the endpoint does not serve: a warning up front, then the server's own message", async () => {
    const warnings: string[] = [];
    const error = await failure(
      search("nomodel", {
        optimizer: { baseUrl: h.optimizer.url, gradientModel: "gpt-nope", editModel: "opt-model" },
        onEvent: (e) => e.type === "warning" && warnings.push(e.message),
      }),
    );
    expect(warnings.join("\n")).toContain('does not list model "gpt-nope" (it lists opt-model)');
    expect(error.code).toBe("optimizer_failed");
    expect(error.message).toContain('answered 404 for model "gpt-nope"');
    expect(error.message).toContain("check the base URL and the model name");
  });

  test("a template with an unknown placeholder is refused before anything runs", async () => {
    const error = await failure(search("badvar", { templates: { prompt: "Answer {question} now" } }));
    expect(error.code).toBe("unknown_placeholder");
    expect(error.message).toContain('prompt template "prompt"');
    expect(error.message).toContain("'question'");
    expect(error.message).toContain("Known variables: q, answer");
    await nothingRan("badvar");
    await expect(h.store.client.getResources({ resourcesId: "apo-badvar-seed" })).rejects.toThrow(/not found/);
    // A variable the agent supplies itself is declared with `variables`.
    expect(() => resolveApoOptions(search("okvar", { templates: { prompt: "Answer {q} {tone}" }, variables: ["tone"] }))).not.toThrow();
  });

  test("empty datasets", async () => {
    expect((await failure(search("e1", { train: [] }))).message).toMatch(/training set is empty.*--train/);
    expect((await failure(search("e2", { val: [] }))).message).toMatch(/validation set is empty.*--val/);
    expect((await failure(search("e3", { train: [] }))).code).toBe("empty_dataset");
  });

  test("an agent whose LLM is down: the baseline says so", async () => {
    const error = await failure(
      search("agentdown", { resources: { llm: { kind: { case: "llm", value: { endpoint: closedUrl, model: "m" } } } } }),
    );
    expect(error.code).toBe("rollouts_failed");
    expect(error.message).toMatch(/none of the 3 baseline rollouts succeeded \(failed\); first error: .*fetch failed/);
  });

  test("resuming a run id with other settings is refused", async () => {
    await runApo(search("same", { rounds: 0 }));
    const error = await failure(search("same", { rounds: 0, seed: 5 }));
    expect(error.code).toBe("resume_mismatch");
    expect(error.message).toContain('APO run "same" is already in the store with other settings');
  });

  test("bad numbers", async () => {
    expect((await failure(search("n1", { beamWidth: 0 }))).message).toBe("beamWidth must be an integer of at least 1, got 0");
    expect((await failure(search("n2", { budget: { rollouts: -1 } }))).message).toContain("budget.rollouts");
    expect((await failure(search("n3", { runId: "has space" }))).message).toContain("run id");
  });
});
