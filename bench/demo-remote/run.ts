/**
 * make demo-remote (root: network namespaces): the demo task trained by VERL's own trainer on CPU on a trainer host,
 * with the store (and its LLM proxy) on a store host and two runner pools on runner hosts — the topology of
 * docs/deployment.md (test/support/topology.ts), TLS everywhere (the CPU replica included), scoped tokens — while each
 * link (runner ↔ store, trainer ↔ store, proxy ↔ engine) is cut once for 5 s while rollouts run, and restored. Prints
 * where each part ran and which cuts it came through, and ends with one line:
 *
 *   demo-remote: <n> steps, initial <a>, final <b>, <k> link cuts survived, <s> s: reached|missed
 *
 * exiting non-zero when missed (the demo's rule: first step <= 0.3, mean of the last 5 steps >= 0.9). Environment:
 * DEMO_SEED (default 0), DEMO_STEPS (default 150), DEMO_DIR (default a new temporary directory).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LanLink } from "../../test/support/lan.js";
import { cutWhileBusy, untilStep } from "../../test/support/link-cuts.js";
import { startTopology, type TrainerContext } from "../../test/support/topology.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const python = join(repoRoot, "python-bridge/.venv/bin/python");
const seed = Number(process.env.DEMO_SEED ?? 0);
const steps = Number(process.env.DEMO_STEPS ?? 150);
const dir = process.env.DEMO_DIR ?? mkdtempSync(join(tmpdir(), "agl-demo-remote-"));
mkdirSync(dir, { recursive: true });
const files = join(dir, "files");
const pythonPath = join(repoRoot, "python-bridge");
const started = Date.now();
const say = (line: string) => process.stdout.write(`demo-remote: ${line}\n`);

// The model of `make demo` (tiny Llama, format warm-up) and the task files, as make demo-verl makes them.
if (!existsSync(join(files, "model/config.json"))) {
  execFileSync(python, ["-m", "agl_bridge.verl.kind_files", files, "--seed", String(seed)], {
    env: { ...process.env, PYTHONPATH: pythonPath },
    stdio: "ignore",
  });
}

/** VERL's trainer on CPU with make demo-verl's settings; its CPU replica serves TLS on the engine link. */
const verlTrainer = (c: TrainerContext) => ({
  args: [
    "-m",
    "agl_bridge.verl",
    `agl.store=${c.storeUrl}`,
    `agl.token=${c.token}`,
    `agl.proxy=${c.proxyUrl}`,
    `agl.train_dataset=${files}/tasks.jsonl`,
    `trainer.total_training_steps=${steps}`,
    "actor_rollout_ref.rollout.n=16",
    "data.train_batch_size=8",
    `actor_rollout_ref.model.path=${files}/model`,
    `trainer.default_local_dir=${c.checkpointDir}`,
    "trainer.device=cpu",
    `hydra.run.dir=${dir}/hydra`,
    `data.train_files=${files}/prompts.parquet`,
    `data.val_files=${files}/prompts.parquet`,
    "data.max_prompt_length=32",
    "data.max_response_length=8",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.actor.optim.lr=7e-4",
    "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
    "actor_rollout_ref.actor.optim.weight_decay=0",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.ppo_epochs=1",
    "actor_rollout_ref.rollout.temperature=1.0",
    `actor_rollout_ref.actor.data_loader_seed=${seed}`,
    `agl.summary=${dir}/summary.json`,
  ],
  env: {
    PYTHONPATH: pythonPath,
    AGL_CA_FILE: c.caFile,
    AGL_ENGINE_HOST: c.engineAddress,
    AGL_ENGINE_ADVERTISE_HOST: c.engineAddress,
    AGL_ENGINE_TLS_CERT: c.engineCert.cert,
    AGL_ENGINE_TLS_KEY: c.engineCert.key,
  },
});

const topology = await startTopology({ dir, steps, tasksPerStep: 8, n: 16, seed, trainer: verlTrainer });
let code = 1;
const survived: string[] = [];
try {
  const h = topology.hosts;
  say(`store and LLM proxy on ${h.store.address} (${topology.storeUrl}, TLS, token file of four scopes)`);
  say(
    `runner pools on ${h.runnerA.address} and ${h.runnerB.address} (runner tokens); VERL's trainer on CPU on ${h.trainer.address}, its engine on the direct link to the store host; files and logs in ${dir}`,
  );
  // Each cut once the trainer is past a step and the store shows rollouts running (of runner-a, for its link).
  const cut = async (name: string, link: LanLink, afterStep: number, workerId?: string) => {
    const done = await cutWhileBusy(topology, { name, link, afterStep, workerId, minInFlight: 8, ms: 5_000 });
    await untilStep(topology, done.duringStep + 1, 600_000);
    survived.push(name);
    say(`cut ${name} for 5 s during step ${done.duringStep + 1} (${done.inFlight} rollouts running); training went on`);
  };
  await cut("runner-a <-> store", h.runnerA.link, 8, "runner-a");
  await cut("trainer <-> store", h.trainer.link, 20);
  await cut("proxy <-> engine", topology.engineLink, 32);
  const exit = await topology.trainer.exited;
  if (exit !== 0) throw new Error(`the trainer exited with ${exit}\n${topology.logs()}`);
  const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as {
    rewards: number[];
    initial_reward: number;
    final_reward: number;
  };
  const ok = summary.initial_reward <= 0.3 && summary.final_reward >= 0.9;
  const wall = (Date.now() - started) / 1000;
  say(
    `${summary.rewards.length} steps, initial ${summary.initial_reward.toFixed(3)}, final ${summary.final_reward.toFixed(3)}, ` +
      `${survived.length} link cuts survived, ${wall.toFixed(0)} s: ${ok ? "reached" : "missed"}`,
  );
  code = ok ? 0 : 1;
} catch (error) {
  process.stderr.write(`demo-remote: ${(error as Error).message}\n`);
  const wall = (Date.now() - started) / 1000;
  say(
    `${topology.trainer.rewards().length} steps, initial -, final -, ${survived.length} link cuts survived, ${wall.toFixed(0)} s: missed`,
  );
} finally {
  await topology.close();
}
process.exit(code);
