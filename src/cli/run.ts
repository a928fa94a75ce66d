import { createStoreClient } from "../client/store-client.js";
import { trustCaFileFromEnv } from "../core/tls.js";
import { loadAgent } from "../agent/load-agent.js";
import { registerAgentLoaders } from "../agent/module-loaders.js";
import { createInProcessExecutor } from "../runner/in-process-executor.js";
import { createPoolExecutor } from "../runner/pool-executor.js";
import { createRunner } from "../runner/runner.js";
import type { RunArgs } from "./run-args.js";

/**
 * Runs `agl run`: a runner against the store until SIGTERM or SIGINT (then a graceful stop: running rollouts finish
 * or go back to the queue) or until `--max-rollouts` are done. Prints one line when it starts and a JSON summary when
 * it ends. Resolves to the exit code.
 */
export async function runAgent(args: RunArgs): Promise<number> {
  // The agents' own HTTPS calls (to the proxy) trust the CA too, on this thread and on every worker thread.
  if (args.store.caFile) process.env.AGL_CA_FILE = args.store.caFile;
  trustCaFileFromEnv();
  const store = createStoreClient({ ...args.store, keepaliveMs: args.keepaliveMs });
  if (args.workers === 0) await registerAgentLoaders(args.agentModule);
  const executor =
    args.workers === 0
      ? createInProcessExecutor({ agent: await loadAgent(args.agentModule, args.exportName), concurrency: args.concurrency })
      : createPoolExecutor({
          agentModule: args.agentModule,
          workers: args.workers,
          concurrency: args.concurrency,
          blockedWorkerMs: args.blockedWorkerMs,
          ...(args.exportName ? { exportName: args.exportName } : {}),
        });
  const runner = createRunner({
    store,
    executor,
    pollWaitSeconds: args.pollWaitSeconds,
    shutdownGraceMs: args.shutdownGraceMs,
    heartbeatIntervalMs: args.heartbeatMs,
    ...(args.store.token ? { proxyApiKey: args.store.token } : {}),
    ...(args.workerId ? { workerId: args.workerId } : {}),
    ...(args.maxRollouts ? { maxRollouts: args.maxRollouts } : {}),
  });
  const where = args.workers === 0 ? "the main thread" : `${args.workers} worker thread(s)`;
  process.stdout.write(
    `agl runner ${runner.workerId} running ${args.agentModule} on ${where} × ${args.concurrency} against ${args.store.baseUrl}\n`,
  );
  const onSignal = () => {
    process.once("SIGTERM", () => process.exit(1));
    process.once("SIGINT", () => process.exit(1));
    void runner.stop();
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);
  try {
    const summary = await runner.run();
    process.stdout.write(`agl runner finished: ${JSON.stringify(summary)}\n`);
    return 0;
  } finally {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    await executor.close();
    store.close();
  }
}
