/**
 * Cutting the links of a running topology (`topology.ts`) at moments chosen by progress, not by the clock: after a
 * given training step, once the store shows the work the cut must hit in flight (rollouts running, of one runner when
 * it is the runner's link). Used by `test/faults/multi-host.test.ts` and `bench/demo-remote/run.ts`.
 */
import { createStoreClient } from "../../src/client/store-client.js";
import { RolloutMode, RolloutStatus } from "../../src/gen/agl/v1/types_pb.js";
import type { LanLink } from "./lan.js";
import { TOPOLOGY_TOKENS, type Topology } from "./topology.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One cut, as it happened. */
export interface LinkCut {
  link: string;
  /** Steps the trainer had finished when the link was cut. */
  duringStep: number;
  /** Rollouts running when it was cut. */
  inFlight: number;
  restoredAt: number;
  /** Seconds from the restore to the trainer's next finished step (what the cut cost beyond itself). */
  nextStepAfterS?: number;
}

export interface CutOptions {
  name: string;
  link: LanLink;
  /** Cut once the trainer has finished this many steps... */
  afterStep: number;
  /** ...and at least `minInFlight` training rollouts are running (held by `workerId`, when given)... */
  minInFlight: number;
  workerId?: string;
  /**
   * ...and, when given, at least this many training rollouts are not finished yet. A demo step's last rollouts finish
   * within a few tenths of a second: with only `minInFlight` running, the trainer's wait on them could end between the
   * look and the cut, and the cut then found only its triplet stream in flight.
   */
  minUnfinished?: number;
  /** How long the link stays down. */
  ms: number;
}

/** How many rollouts the store holds in each status, and the workers it knows (for failure messages). */
export async function storeState(t: Topology): Promise<string> {
  const client = createStoreClient({ baseUrl: t.storeUrl, token: TOPOLOGY_TOKENS.admin, caFile: t.caFile, maxTries: 1, timeoutMs: 5_000 });
  try {
    const { rollouts } = await client.queryRollouts({});
    const counts: Record<string, number> = {};
    for (const r of rollouts) counts[RolloutStatus[r.status]] = (counts[RolloutStatus[r.status]] ?? 0) + 1;
    const { workers } = await client.queryWorkers({});
    return `store: rollouts ${JSON.stringify(counts)}, workers ${JSON.stringify(workers.map((w) => [w.workerId, w.status]))}`;
  } catch (error) {
    return `store: unreadable (${(error as Error).message})`;
  } finally {
    client.close();
  }
}

/** Resolves once the trainer has finished `step` steps; throws when it exits first or `timeoutMs` passes. */
export async function untilStep(t: Topology, step: number, timeoutMs: number): Promise<void> {
  for (const giveUp = Date.now() + timeoutMs; t.trainer.rewards().length < step; await sleep(200)) {
    if (t.trainer.child.exitCode !== null) throw new Error(`the trainer exited with ${t.trainer.child.exitCode}\n${t.logs()}`);
    if (Date.now() > giveUp) {
      throw new Error(`the trainer did not reach step ${step} in ${timeoutMs} ms\n${await storeState(t)}\n${t.logs()}`);
    }
  }
}

/** Cuts `options.link` when the trainer is past `afterStep` and the work is in flight, restores it `ms` later. */
export async function cutWhileBusy(t: Topology, options: CutOptions): Promise<LinkCut> {
  await untilStep(t, options.afterStep, 300_000);
  const observer = createStoreClient({ baseUrl: t.storeUrl, token: TOPOLOGY_TOKENS.reader, caFile: t.caFile, timeoutMs: 5_000 });
  const unfinished = [RolloutStatus.QUEUING, RolloutStatus.PREPARING, RolloutStatus.RUNNING, RolloutStatus.REQUEUING];
  const look = async () => {
    const { rollouts } = await observer.queryRollouts({ statusIn: unfinished, modeIn: [RolloutMode.TRAIN] });
    const running = rollouts.filter(
      (r) => r.status === RolloutStatus.RUNNING && (options.workerId === undefined || r.latestAttempt?.workerId === options.workerId),
    );
    return { inFlight: running.length, busy: running.length >= options.minInFlight && rollouts.length >= (options.minUnfinished ?? 0) };
  };
  let seen: Awaited<ReturnType<typeof look>>;
  try {
    const giveUp = Date.now() + 120_000;
    for (seen = await look(); !seen.busy; seen = await look()) {
      if (Date.now() > giveUp)
        throw new Error(`the ${options.name} cut never found the training rollouts it waits for in flight\n${await storeState(t)}`);
      await sleep(20);
    }
  } finally {
    observer.close();
  }
  const duringStep = t.trainer.rewards().length;
  options.link.cut();
  await sleep(options.ms);
  options.link.restore();
  const cut: LinkCut = { link: options.name, duringStep, inFlight: seen.inFlight, restoredAt: Date.now() };
  untilStep(t, t.trainer.rewards().length + 1, 300_000).then(
    () => (cut.nextStepAfterS = (Date.now() - cut.restoredAt) / 1000),
    () => {},
  );
  return cut;
}
