/**
 * `agl run my-agent.<ext>` as users run it: ES-module agents in .ts, .mts, .js and .mjs files outside any
 * `"type": "module"` package (a temp dir with no package.json, a package.json without `type`), on worker threads and
 * on the main thread, against a real store server.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import { startRunnerProcess } from "../support/runner-process.js";
import { jsonValue, type StoreHarness, startStoreHarness, waitFinished } from "../support/store-harness.js";

const sdk = new URL("../../src/index.ts", import.meta.url).pathname;
const agentSource = (typed: boolean) => `import { rollout } from ${JSON.stringify(sdk)};
import { double } from "./helper${typed ? "" : ".mjs"}";
export default rollout(async (task${typed ? ": { x: number }" : ""}) => double(task.x));
`;
let h: StoreHarness;
const dirs: string[] = [];
beforeAll(async () => {
  h = await startStoreHarness();
});
afterAll(async () => {
  await h.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function agentDir(packageJson?: object): string {
  const dir = mkdtempSync(join(tmpdir(), "agl-agent-"));
  dirs.push(dir);
  if (packageJson) writeFileSync(join(dir, "package.json"), JSON.stringify(packageJson));
  // A helper next to the agent, imported by relative path, written as an ES module too.
  writeFileSync(join(dir, "helper.ts"), "export const double = (x: number): number => x * 2;\n");
  writeFileSync(join(dir, "helper.mjs"), "export const double = (x) => x * 2;\n");
  return dir;
}

const cases: { name: string; file: string; packageJson?: object; workers: string }[] = [
  { name: ".ts in a dir with no package.json, on a worker thread", file: "my-agent.ts", workers: "1" },
  { name: ".ts in a dir with no package.json, on the main thread", file: "my-agent.ts", workers: "0" },
  { name: ".ts beside a package.json without type", file: "my-agent.ts", packageJson: { name: "mine", version: "1.0.0" }, workers: "1" },
  {
    name: ".ts beside a package.json with type commonjs, on the main thread",
    file: "my-agent.ts",
    packageJson: { type: "commonjs" },
    workers: "0",
  },
  { name: ".mts, on a worker thread", file: "my-agent.mts", workers: "1" },
  { name: ".js in a dir with no package.json", file: "my-agent.js", workers: "1" },
  { name: ".mjs, on the main thread", file: "my-agent.mjs", workers: "0" },
];

describe("agl run loads agent files wherever they are", () => {
  it.each(cases)(
    "$name",
    async ({ file, packageJson, workers }) => {
      const dir = agentDir(packageJson);
      const path = join(dir, file);
      writeFileSync(path, agentSource(/\.m?ts$/.test(file)));
      const { rollouts } = await h.client.enqueueRollouts({ rollouts: [{ input: jsonValue({ x: 0.25 }) }] });
      const runner = await startRunnerProcess([path, "--store", h.url, "--workers", workers, "--max-rollouts", "1", "--poll-wait", "0.3"]);
      const code = await runner.exited;
      expect({ code, stderr: runner.stderr() }).toMatchObject({ code: 0 });
      const [finished] = await waitFinished(h.client, [rollouts[0]!.rolloutId]);
      expect(finished?.status).toBe(RolloutStatus.SUCCEEDED);
      const { spans } = await h.client.querySpans({ rolloutId: rollouts[0]!.rolloutId });
      expect(spans.some((s) => JSON.stringify(s.attributes).includes("0.5"))).toBe(true);
    },
    60_000,
  );
});
