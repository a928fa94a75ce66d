import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ApoReport } from "../../src/algorithm/apo/apo-report.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { agl, roomExampleArgs } from "./agl-cli.js";
import { roomAgentPolicy, roomOptimizerPolicy } from "./fixtures/room-policies.js";

const example = "examples/room-booking";

let agentLlm: FakeLlmServer;
let optimizer: FakeLlmServer;
let dir: string;
beforeAll(async () => {
  agentLlm = await startFakeLlmServer({ model: "agent-model", policy: roomAgentPolicy });
  optimizer = await startFakeLlmServer({ model: "opt-model", policy: roomOptimizerPolicy });
  dir = mkdtempSync(join(tmpdir(), "agl-apo-cli-"));
});
afterAll(async () => {
  await agentLlm.close();
  await optimizer.close();
  rmSync(dir, { recursive: true, force: true });
});

const exampleArgs = () => roomExampleArgs(agentLlm.url, optimizer.url);

describe("agl apo", () => {
  test("optimizes the room-booking example: progress, a report on stdout and as JSON", async () => {
    const report = join(dir, "room.json");
    const run = await agl([
      ...exampleArgs(),
      "--beam",
      "2",
      "--branch",
      "2",
      "--rounds",
      "2",
      "--batch",
      "4",
      "--val-batch",
      "10",
      "--run-id",
      "rooms",
      "--report",
      report,
    ]);
    expect(run.stderr).toContain("apo run rooms (new): templates booking; train 30, val 30; beam 2 × branch 2, 2 rounds");
    expect(run.stderr).toContain("a round costs at most 8 optimizer calls and 96 rollouts");
    expect(run.stderr).toMatch(/baseline: seed scores 0\.\d{3} on 30 validation tasks/);
    expect(run.stderr).toMatch(/round 1: parents seed, seed/);
    expect(run.stderr).toMatch(/new best r1p\db\d: 1\.000 on the full validation set, published as apo-rooms-best v\d+/);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("APO run rooms: completed");
    expect(run.stdout).toMatch(/round +candidates +batch best +leader +full val +best/);
    expect(run.stdout).toContain("Among the free rooms that fit, choose the one with the fewest seats");
    expect(run.stdout).toMatch(/Budget used: \d+ rollouts, \d+ optimizer calls, \d+ optimizer tokens/);
    const json = JSON.parse(readFileSync(report, "utf8")) as ApoReport;
    expect(json.rounds.map((r) => r.round)).toEqual([1, 2]);
    expect(json.baseline).toBeLessThan(0.8);
    expect(json.best.score).toBe(1);
    expect(json.best.templates.booking?.template).toContain("{rooms}");
    expect(run.stdout).toContain(`Report written to ${report}`);
  }, 120_000);

  test("warns up front when the budget cannot complete one round", async () => {
    const run = await agl([
      ...exampleArgs(),
      "--beam",
      "2",
      "--branch",
      "2",
      "--val-batch",
      "10",
      "--budget-rollouts",
      "40",
      "--report",
      join(dir, "small.json"),
    ]);
    const lines = run.stderr.split("\n");
    const warning = lines.findIndex((l) => l.startsWith("warning: the budget cannot complete one round"));
    expect(warning).toBeGreaterThan(0);
    expect(warning).toBeLessThan(lines.findIndex((l) => l.startsWith("baseline:")));
    expect(run.stderr).toContain("stopped: round 1 may need 96 rollouts");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("budget_exhausted");
  }, 120_000);

  test("usage and input errors are clear", async () => {
    const missing = await agl(["apo", `${example}/agent.ts`, "--val", "x", "--prompt", "a=b"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("agl: --train FILE is required\nRun 'agl apo --help' for usage.");
    const noFile = await agl(["apo", `${example}/agent.ts`, "--train", "nope.jsonl", "--val", "nope.jsonl", "--prompt", "a=b"]);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain("--train: cannot read nope.jsonl (ENOENT)");
    const badVar = await agl([...exampleArgs().filter((a) => a !== "--var" && a !== "rooms"), "--report", join(dir, "x.json")]);
    expect(badVar.code).toBe(1);
    expect(badVar.stderr).toContain("missing variable 'rooms'");
    expect(badVar.stderr).toContain("--var");
    const probe = http.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const closedUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}/v1`;
    await new Promise((resolve) => probe.close(resolve));
    const closed = await agl([...exampleArgs(), "--optimizer-base-url", closedUrl, "--report", join(dir, "y.json")]);
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain(`agl: cannot reach the optimizer LLM at ${closedUrl} (ECONNREFUSED); check the base URL`);
    writeFileSync(join(dir, "empty.jsonl"), "\n");
    const empty = await agl([
      ...exampleArgs().map((a) => (a.endsWith("train.jsonl") ? join(dir, "empty.jsonl") : a)),
      "--report",
      join(dir, "z.json"),
    ]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain("agl: the training set is empty");
    const help = await agl(["apo", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--budget-rollouts N");
  }, 120_000);
});
