/**
 * The store the dashboard's browser tests look at: a real `agl serve` (SQLite, a token, the LLM proxy in front of the
 * loopback engine) filled by real runs, one after another (runners take any queued rollout, so two runs at once would
 * take each other's): the calculator example through `agl run`'s runner pool and the proxy, with a rollout that fails
 * twice; a short RL run of the rl-kind example by `agl train` (local trainer: resources versions, train and val
 * rollouts with rewards); an APO run of the room-booking example by `agl apo`.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ApoReport } from "../../src/algorithm/apo/apo-report.js";
import { createStoreClient, type StoreClient } from "../../src/client/store-client.js";
import { AttemptStatus, type Rollout } from "../../src/gen/agl/v1/types_pb.js";
import { agl, roomExampleArgs } from "../apo/agl-cli.js";
import { roomAgentPolicy, roomOptimizerPolicy } from "../apo/fixtures/room-policies.js";
import { calculatorPolicy } from "../support/calculator-policy.js";
import { type FakeLlmServer, startFakeLlmServer } from "../support/fake-llm-server.js";
import { type ServerProcess, startServerProcess } from "../support/server-process.js";
import { waitFinished } from "../support/store-harness.js";

export const CALCULATOR_RESOURCES = "calculator";
export const TRAIN_RESOURCES = "agl-policy";
export const APO_RUN = "rooms";

/** Calculator tasks: the model gets each right, so a wrong expected answer gives reward 0 to a succeeded rollout. */
const calculatorTasks = [
  { question: "What is 12 * 7?", answer: 84 },
  { question: "What is 1000 - 1?", answer: 999 },
  { question: "What is 81 / 9?", answer: 9 },
  { question: "What is 6 * 7?", answer: 41 },
];

export interface DashboardStore {
  url: string;
  token: string;
  client: StoreClient;
  engine: FakeLlmServer;
  /** The calculator rollouts, as finished, in task order. */
  calculator: Rollout[];
  /** A calculator rollout whose two attempts failed (the engine answered 400). */
  failed: Rollout;
  apo: ApoReport;
  /** The mean train reward of each step, as `agl train` printed it. */
  stepRewards: number[];
  /** Runs one more calculator task through a fresh `agl run`; resolves when it finished. */
  runCalculator(task: { question: string; answer: number }): Promise<Rollout>;
  close(): Promise<void>;
}

async function must(run: Promise<{ code: number | null; stdout: string; stderr: string }>, what: string) {
  const result = await run;
  if (result.code !== 0) throw new Error(`${what} exited with ${result.code}:\n${result.stderr.slice(-4_000)}`);
  return result;
}

export async function startDashboardStore(): Promise<DashboardStore> {
  const dir = mkdtempSync(join(tmpdir(), "agl-dashboard-"));
  const token = "dashboard-token";
  const engine = await startFakeLlmServer({ model: "calc-model", policy: calculatorPolicy });
  const agentLlm = await startFakeLlmServer({ model: "agent-model", policy: roomAgentPolicy });
  const optimizer = await startFakeLlmServer({ model: "opt-model", policy: roomOptimizerPolicy });
  let server: ServerProcess | undefined;
  let client: StoreClient | undefined;
  const close = async () => {
    client?.close();
    await server?.stop();
    await Promise.all([engine.close(), agentLlm.close(), optimizer.close()]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    server = await startServerProcess([
      "--database",
      join(dir, "agl.db"),
      "--token",
      token,
      "--proxy-backend",
      engine.url,
      "--proxy-model",
      engine.model,
    ]);
    const url = server.url;
    client = createStoreClient({ baseUrl: url, token });
    // The CLI reads the store's token from AGL_TOKEN; the runner hands it to the agents as the key of the proxy_llm
    // bound to each attempt (the LLM proxy wants the same token).
    const env = { AGL_TOKEN: token };
    await client.updateResources({
      resourcesId: CALCULATOR_RESOURCES,
      createIfMissing: true,
      resources: { main_llm: { kind: { case: "proxyLlm", value: { endpoint: `${url}/v1`, model: engine.model } } } },
    });
    // `attempts`: how many attempts the runner finishes before it exits.
    const runCalculator = async (tasks: { question: string; answer: number }[], config = {}, attempts = tasks.length) => {
      const runner = must(
        agl(["run", "examples/calculator/agent.ts", "--store", url, "--workers", "1", "--max-rollouts", String(attempts)], env),
        "agl run",
      );
      const { rollouts } = await (client as StoreClient).enqueueRollouts({
        rollouts: tasks.map((input) => ({ input, resourcesId: CALCULATOR_RESOURCES, config })),
      });
      const finished = await waitFinished(
        client as StoreClient,
        rollouts.map((r) => r.rolloutId),
        60,
      );
      await runner;
      return rollouts.map((r) => finished.find((f) => f.rolloutId === r.rolloutId) as Rollout);
    };

    const calculator = await runCalculator(calculatorTasks);
    // Two 400s: the agent's client does not retry them, so both attempts fail.
    engine.fault({ type: "status", status: 400, body: JSON.stringify({ error: { message: "prompt is too long" } }) });
    engine.fault({ type: "status", status: 400, body: JSON.stringify({ error: { message: "prompt is too long" } }) });
    const [failed] = await runCalculator(
      [{ question: "What is 2 + 2?", answer: 4 }],
      {
        maxAttempts: 2,
        retryCondition: [AttemptStatus.FAILED],
      },
      2,
    );

    // 3 steps of 4 tasks x 4 samples; validation on 4 tasks before training, after step 2 and after step 3.
    const training = await must(
      agl(
        [
          ...["train", "examples/rl-kind/agent.ts", "--store", url, "--steps", "3", "--n", "4", "--tasks-per-step", "4", "--"],
          ...["--warmup-steps", "300", "--val-tasks", "4", "--test-freq", "2", "--checkpoint-dir", join(dir, "checkpoints")],
        ],
        env,
      ),
      "agl train",
    );

    const report = join(dir, "apo.json");
    await must(
      agl(
        [
          ...roomExampleArgs(agentLlm.url, optimizer.url),
          "--store",
          url,
          ...["--beam", "2", "--branch", "2", "--rounds", "2", "--batch", "4", "--val-batch", "10"],
          ...["--run-id", APO_RUN, "--report", report, "--quiet"],
        ],
        env,
      ),
      "agl apo",
    );
    const apo = JSON.parse(readFileSync(report, "utf8")) as ApoReport;

    return {
      url,
      token,
      client,
      engine,
      calculator,
      failed: failed as Rollout,
      apo,
      stepRewards: [...training.stderr.matchAll(/step \d+\/\d+ +reward (\d\.\d+)/g)].map((m) => Number(m[1])),
      runCalculator: async (task) => (await runCalculator([task]))[0] as Rollout,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
