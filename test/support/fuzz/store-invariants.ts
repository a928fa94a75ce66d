/**
 * Consistency of everything a store holds, read back through its API: what must hold whatever sequence of calls
 * (valid or not) came before. Returns the violations found, each as a sentence; none means consistent.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { AttemptStatus, RolloutStatus, WorkerStatus } from "../../../src/gen/agl/v1/types_pb.js";
import type { StoreApi } from "../../../src/store/store-api.js";

const known = (names: Record<number, string>, value: number) => value !== 0 && names[value] !== undefined;

/** A rollout with its attempts and spans, read one after the other. */
async function readRollout(store: StoreApi, rolloutId: string) {
  const rollout = await store.getRollout({ rolloutId });
  const { attempts } = await store.queryAttempts({ rolloutId });
  const latest = (await store.getLatestAttempt({ rolloutId })).attempt;
  const { spans } = await store.querySpans({ rolloutId });
  return { rollout, attempts, latest, spans };
}

export async function storeViolations(store: StoreApi): Promise<string[]> {
  const problems: string[] = [];
  const fail = (text: string) => problems.length < 50 && problems.push(text);
  const { rollouts } = await store.queryRollouts({});
  const ids = new Set<string>();
  let attemptCount = 0;
  let spanCount = 0;
  for (const listed of rollouts) {
    const id = listed.rolloutId;
    if (ids.has(id)) fail(`rollout ${id} is listed twice`);
    ids.add(id);
    // The server's watchdog may still time attempts out meanwhile: read until two reads of the rollout agree.
    let stable: Awaited<ReturnType<typeof readRollout>> | undefined;
    for (let tries = 0; tries < 5 && stable === undefined; tries++) {
      const read = await readRollout(store, id);
      const again = await store.getRollout({ rolloutId: id });
      if (again.status === read.rollout.status && again.latestAttempt?.status === read.rollout.latestAttempt?.status) stable = read;
    }
    if (stable === undefined) {
      fail(`rollout ${id} kept changing while nothing but the watchdog ran`);
      continue;
    }
    const { rollout, attempts, latest, spans } = stable;
    attemptCount += attempts.length;
    spanCount += spans.length;
    if (!known(RolloutStatus, rollout.status)) fail(`rollout ${id} has status ${rollout.status}`);
    const attemptIds = new Set<string>();
    attempts.forEach((attempt, i) => {
      if (attempt.rolloutId !== id) fail(`attempt ${attempt.attemptId} listed under ${id} belongs to ${attempt.rolloutId}`);
      if (attempt.sequenceId !== i + 1) fail(`attempt ${i} of ${id} has sequence id ${attempt.sequenceId}, expected ${i + 1}`);
      if (attemptIds.has(attempt.attemptId)) fail(`attempt id ${attempt.attemptId} repeats in ${id}`);
      attemptIds.add(attempt.attemptId);
      if (!known(AttemptStatus, attempt.status)) fail(`attempt ${attempt.attemptId} of ${id} has status ${attempt.status}`);
    });
    const last = attempts.at(-1);
    if (last?.attemptId !== rollout.latestAttempt?.attemptId || last?.status !== rollout.latestAttempt?.status) {
      fail(
        `rollout ${id}: latest attempt ${rollout.latestAttempt?.attemptId} (${rollout.latestAttempt?.status}) is not its last one ` +
          `${last?.attemptId} (${last?.status})`,
      );
    }
    if (latest?.attemptId !== last?.attemptId)
      fail(`rollout ${id}: GetLatestAttempt says ${latest?.attemptId}, the list ends with ${last?.attemptId}`);

    // An explicit sequence id is kept as the caller sent it (docs/store-semantics.md, item 8), so two spans sent with the
    // same one share it; what the store must guarantee is that every id it hands out lies above every id it holds.
    let maxSequenceId = 0;
    const spanKeys = new Set<string>();
    for (const span of spans) {
      if (span.rolloutId !== id) fail(`span ${span.spanId} listed under ${id} belongs to ${span.rolloutId}`);
      if (!attemptIds.has(span.attemptId)) fail(`span ${span.spanId} of ${id} names an attempt it does not have: ${span.attemptId}`);
      if (span.sequenceId === 0) fail(`span ${span.spanId} of ${id} has sequence id 0`);
      maxSequenceId = Math.max(maxSequenceId, span.sequenceId);
      const key = `${span.attemptId}/${span.spanId}`;
      if (spanKeys.has(key)) fail(`span ${key} of ${id} is stored twice`);
      spanKeys.add(key);
    }
    if (last) {
      const next = await store.nextSpanSequenceIds({ requests: [{ rolloutId: id, attemptId: last.attemptId }] }).then(
        (answer) => answer.sequenceIds[0],
        // The counter reached the largest uint32 (an explicit sequence id raised it there): no id can repeat.
        (error: unknown) => {
          if (error instanceof ConnectError && error.code === Code.OutOfRange) return Number.POSITIVE_INFINITY;
          throw error;
        },
      );
      if (next === undefined || next <= maxSequenceId) fail(`rollout ${id}: next sequence id ${next} is not above the stored ones`);
    }
  }

  const { workers } = await store.queryWorkers({});
  for (const worker of workers) {
    if (!known(WorkerStatus, worker.status)) fail(`worker ${worker.workerId} has status ${worker.status}`);
  }

  const { resources } = await store.queryResources({});
  const versions = new Map<string, number[]>();
  for (const update of resources) versions.set(update.resourcesId, [...(versions.get(update.resourcesId) ?? []), update.version]);
  for (const [id, list] of versions) {
    if (new Set(list).size !== list.length) fail(`resources ${id} lists a version twice: ${list.join(", ")}`);
  }

  const stats = await store.getStatistics({});
  if (stats.totalRollouts !== rollouts.length) fail(`statistics count ${stats.totalRollouts} rollouts, the query finds ${rollouts.length}`);
  if (stats.totalAttempts !== attemptCount) fail(`statistics count ${stats.totalAttempts} attempts, the queries find ${attemptCount}`);
  if (stats.totalSpans !== spanCount) fail(`statistics count ${stats.totalSpans} spans, the queries find ${spanCount}`);
  if (stats.totalWorkers !== workers.length) fail(`statistics count ${stats.totalWorkers} workers, the query finds ${workers.length}`);
  const byStatus = Object.values(stats.rolloutsByStatus).reduce((n, c) => n + c, 0);
  if (byStatus !== rollouts.length) fail(`statistics by status add up to ${byStatus}, not ${rollouts.length}`);
  return problems;
}

/**
 * Drains the queue and checks that it held the rollouts waiting in it (`queuing` or `requeuing`), each once, and no
 * finished rollout. Changes the store: run it last.
 */
export async function queueViolations(store: StoreApi): Promise<string[]> {
  const before = new Map((await store.queryRollouts({})).rollouts.map((r) => [r.rolloutId, r.status]));
  const waiting = [...before]
    .filter(([, status]) => status === RolloutStatus.QUEUING || status === RolloutStatus.REQUEUING)
    .map(([id]) => id);
  const claimed: string[] = [];
  for (;;) {
    const { rollouts } = await store.dequeueRollouts({ workerId: "fuzz-drain", limit: 1_000 });
    if (rollouts.length === 0) break;
    claimed.push(...rollouts.map((r) => r.rolloutId));
  }
  const problems: string[] = [];
  if (new Set(claimed).size !== claimed.length)
    problems.push(`the queue handed out a rollout twice: ${claimed.length} claims of ${new Set(claimed).size}`);
  const missing = waiting.filter((id) => !claimed.includes(id));
  if (missing.length > 0) problems.push(`rollouts waiting but never dequeued: ${missing.slice(0, 5).join(", ")} (${missing.length})`);
  // The watchdog may requeue a running rollout meanwhile; a finished one must never come out of the queue.
  const finished = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);
  const wrong = claimed.filter((id) => !before.has(id) || finished.has(before.get(id)!));
  if (wrong.length > 0) problems.push(`finished or unknown rollouts dequeued: ${wrong.slice(0, 5).join(", ")} (${wrong.length})`);
  return problems;
}
