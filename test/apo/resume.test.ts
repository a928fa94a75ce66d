import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ApoReport } from "../../src/algorithm/apo/apo-report.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { agentModule, agentPolicy, hintTasks, optimizerPolicy } from "./apo-harness.js";
import { createSqliteBackend } from "../../src/store/backends/sqlite/sqlite-backend.js";
import { createStore } from "../../src/store/store.js";
import { agl, repo } from "./agl-cli.js";

let agentLlm: FakeLlmServer;
let optimizer: FakeLlmServer;
let dir: string;
beforeAll(async () => {
  // Rollouts take a while, so some are in flight when the process is killed.
  agentLlm = await startFakeLlmServer({ model: "agent-model", policy: agentPolicy, latencyMs: 200 });
  optimizer = await startFakeLlmServer({ model: "opt-model", policy: optimizerPolicy });
  dir = mkdtempSync(join(tmpdir(), "agl-apo-resume-"));
  writeFileSync(
    join(dir, "train.jsonl"),
    hintTasks(12)
      .map((t) => JSON.stringify(t))
      .join("\n"),
  );
  writeFileSync(
    join(dir, "val.jsonl"),
    hintTasks(9, 100)
      .map((t) => JSON.stringify(t))
      .join("\n"),
  );
});
afterAll(async () => {
  await agentLlm.close();
  await optimizer.close();
  rmSync(dir, { recursive: true, force: true });
});

const args = (db: string, runId: string) => [
  "apo",
  agentModule,
  "--train",
  join(dir, "train.jsonl"),
  "--val",
  join(dir, "val.jsonl"),
  "--prompt",
  "prompt=Answer this: {q}",
  "--beam",
  "2",
  "--branch",
  "2",
  "--rounds",
  "2",
  "--batch",
  "3",
  "--val-batch",
  "4",
  "--seed",
  "4",
  "--llm-model",
  "agent-model",
  "--llm-base-url",
  agentLlm.url,
  "--optimizer-base-url",
  optimizer.url,
  "--gradient-model",
  "opt-model",
  "--edit-model",
  "opt-model",
  "--optimizer-concurrency",
  "1",
  "--db",
  join(dir, db),
  "--run-id",
  runId,
  "--report",
  join(dir, `${runId}.json`),
  "--workers",
  "1",
  "--concurrency",
  "4",
  "--unresponsive-seconds",
  "2",
];

/** Starts `agl apo` and resolves once its progress shows `pattern`. */
async function startUntil(argv: string[], pattern: RegExp): Promise<{ child: ChildProcess; stderr: () => string }> {
  const child = spawn(process.execPath, ["bin/agl.js", ...argv], { cwd: repo, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (pattern.test(stderr)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`agl apo exited (${code}) before ${pattern}:\n${stderr}`)));
  });
  return { child, stderr: () => stderr };
}

const path = (r: ApoReport) =>
  r.rounds.map(({ parents, children, rejected, scores, valBatch, beam, leader, leaderScore, best }) => ({
    parents,
    children,
    rejected,
    scores,
    valBatch,
    beam,
    leader,
    leaderScore,
    best,
  }));

test("a run killed with SIGKILL mid-round resumes from the store and ends as an uninterrupted run does", async () => {
  const calls0 = optimizer.requests.length;
  const reference = await agl(args("reference.db", "ref"));
  expect(reference.code).toBe(0);
  const referenceCalls = optimizer.requests.length - calls0;
  const expected = JSON.parse(readFileSync(join(dir, "ref.json"), "utf8")) as ApoReport;

  // Kill it once the first child of round 1 is recorded: other steps and their rollouts are still under way.
  const calls1 = optimizer.requests.length;
  const first = await startUntil(args("killed.db", "crash"), /r1p\db\d ← seed/);
  first.child.kill("SIGKILL");
  await once(first.child, "exit");
  expect(first.stderr()).not.toContain("round 1 done");
  const killedCalls = optimizer.requests.length - calls1;

  const calls2 = optimizer.requests.length;
  const resumed = await agl(args("killed.db", "crash"));
  expect(resumed.code).toBe(0);
  expect(resumed.stderr).toContain("apo run crash (resumed from the store)");
  expect(resumed.stderr).toMatch(/r1p\db\d ← seed \(prompt\) \[from the store\]/);
  const resumedCalls = optimizer.requests.length - calls2;
  const report = JSON.parse(readFileSync(join(dir, "crash.json"), "utf8")) as ApoReport;

  expect(report.resumed).toBe(true);
  expect(path(report)).toEqual(path(expected));
  expect(report.best.templates).toEqual(expected.best.templates);
  expect(report.baseline).toBe(expected.baseline);
  // Finished work was not paid for twice: the budget matches the uninterrupted run's, and only the optimizer
  // calls that had not completed before the kill were made again.
  expect(report.budget.used).toEqual(expected.budget.used);
  expect(resumedCalls).toBeLessThan(referenceCalls);
  expect(killedCalls + resumedCalls).toBeGreaterThanOrEqual(referenceCalls);
  expect(killedCalls + resumedCalls).toBeLessThanOrEqual(referenceCalls + 2);
  // Rollouts the killed process was running were marked unresponsive by the store and run again.
  const store = createStore({ backend: createSqliteBackend({ path: join(dir, "killed.db") }), watchdogIntervalSeconds: 0 });
  try {
    const { rollouts } = await store.queryRollouts({});
    expect(rollouts.filter((r) => (r.latestAttempt?.sequenceId ?? 0) > 1).length).toBeGreaterThan(0);
    expect(rollouts.length).toBe(report.budget.used.rollouts);
  } finally {
    await store.close();
  }
}, 120_000);
