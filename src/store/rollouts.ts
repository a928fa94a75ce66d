import { create } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  DequeueRolloutsRequestSchema,
  EnqueueRolloutsRequestSchema,
  GetRolloutRequestSchema,
  QueryRolloutsRequestSchema,
  StartAttemptRequestSchema,
  StartRolloutRequestSchema,
  UpdateRolloutRequestSchema,
  WaitForRolloutsRequestSchema,
} from "../gen/agl/v1/store_pb.js";
import {
  FilterLogic,
  type Rollout,
  RolloutConfigSchema,
  RolloutMode,
  RolloutSchema,
  type RolloutSpec,
  RolloutSpecSchema,
  RolloutStatus,
} from "../gen/agl/v1/types_pb.js";
import type { StorageTx } from "./backend.js";
import { callScope, newAttempt, pageInfo, requireRollout, type StoreContext, withLatestAttempts } from "./context.js";
import { sleep } from "../core/retry.js";
import { rolloutScope } from "./rollout-scope.js";
import { notFound } from "./errors.js";
import { newRolloutId } from "./ids.js";
import { isFinished, isQueued, markWorkerIdle } from "./state-machine.js";
import type { StoreApi } from "./store-api.js";
import { cancelLatestAttempt, syncAttemptWorker, writeRolloutStatus } from "./transitions.js";
import { checkConfig, checkCount, checkEnum, checkId, checkSeconds, checkStruct, checkValue, toPageSpec } from "./validate.js";

type RolloutMethods = Pick<
  StoreApi,
  | "enqueueRollouts"
  | "dequeueRollouts"
  | "startRollout"
  | "startAttempt"
  | "getRollout"
  | "queryRollouts"
  | "updateRollout"
  | "waitForRollouts"
>;

/** A resources snapshot id and the version a rollout records of it. */
interface ResourcesRef {
  resourcesId: string;
  version: number;
}

/** Queue and rollout lifecycle: enqueue, dequeue (long-poll), start, read, query, update, wait. */
export function rolloutMethods(ctx: StoreContext): RolloutMethods {
  const { limits } = ctx;

  /**
   * The current version of a resources id ("" has none: 0); an unknown id is NOT_FOUND. `seen` keeps the versions one
   * call has read: an enqueue of a step's rollouts names one id for all of them.
   */
  async function resourcesVersion(tx: StorageTx, resourcesId: string, seen = new Map<string, number>()): Promise<number> {
    if (!resourcesId) return 0;
    const known = seen.get(resourcesId);
    if (known !== undefined) return known;
    const update = await tx.getResources(resourcesId);
    if (!update) throw notFound(`resources ${JSON.stringify(resourcesId)} not found`);
    seen.set(resourcesId, update.version);
    return update.version;
  }

  /** Validates a spec and builds the rollout it describes (resources default to the latest snapshot). */
  async function buildRollout(
    tx: StorageTx,
    spec: RolloutSpec,
    status: RolloutStatus,
    latest: ResourcesRef,
    versions: Map<string, number> = new Map(),
  ) {
    checkEnum(spec.mode, RolloutMode, "mode", true);
    checkConfig(spec.config, limits);
    checkValue(spec.input, "input");
    checkStruct(spec.metadata, "metadata");
    // Bounded like an id: PostgreSQL indexes it, and an index entry holds about 2.7 kB.
    if (spec.groupId) checkId(spec.groupId, "group_id", limits);
    const resources = spec.resourcesId
      ? { resourcesId: spec.resourcesId, version: await resourcesVersion(tx, spec.resourcesId, versions) }
      : latest;
    const config = create(RolloutConfigSchema, spec.config ?? {});
    config.maxAttempts ||= 1;
    return create(RolloutSchema, {
      rolloutId: newRolloutId(),
      input: spec.input ?? create(ValueSchema, { kind: { case: "nullValue", value: 0 } }),
      startTime: ctx.now(),
      mode: spec.mode,
      resourcesId: resources.resourcesId,
      resourcesVersion: resources.version,
      status,
      config,
      metadata: spec.metadata ?? {},
      groupId: spec.groupId,
    });
  }

  const latestResources = async (tx: StorageTx): Promise<ResourcesRef> => {
    const update = await tx.latestResources();
    return { resourcesId: update?.resourcesId ?? "", version: update?.version ?? 0 };
  };

  /** Claims up to `limit` queued rollouts in one transaction. */
  function claim(limit: number, workerId: string): Promise<Rollout[]> {
    return ctx.write(async (tx) => {
      const now = ctx.now();
      const claimed: Rollout[] = [];
      while (claimed.length < limit) {
        const ids = await tx.dequeue(limit - claimed.length);
        if (ids.length === 0) break;
        for (const id of ids) {
          const rollout = await tx.getRollout(id);
          if (!rollout || !isQueued(rollout.status)) continue;
          const attempt = await newAttempt(tx, id, workerId, now);
          await tx.insertAttempt(attempt);
          rollout.status = RolloutStatus.PREPARING;
          rollout.endTime = undefined;
          await tx.putRollout(rollout);
          rollout.latestAttempt = attempt;
          claimed.push(rollout);
        }
      }
      const last = claimed[claimed.length - 1]?.latestAttempt;
      if (last) await syncAttemptWorker(tx, last, now, true);
      else if (workerId) await tx.putWorker(markWorkerIdle(await tx.getWorker(workerId), workerId, now));
      return claimed;
    });
  }

  return {
    async enqueueRollouts(init) {
      const req = create(EnqueueRolloutsRequestSchema, init);
      checkCount(req.rollouts.length, limits.rolloutsPerEnqueue, "rollouts");
      await ctx.maybeScan();
      const rollouts = await ctx.write(async (tx) => {
        const latest = await latestResources(tx);
        const built: Rollout[] = [];
        const versions = new Map<string, number>();
        for (const spec of req.rollouts) built.push(await buildRollout(tx, spec, RolloutStatus.QUEUING, latest, versions));
        await tx.insertRollouts(built);
        await tx.enqueue(built.map((r) => r.rolloutId));
        if (built.length > 0) tx.notify({ kind: "queued" });
        return built;
      });
      return { $typeName: "agl.v1.EnqueueRolloutsResponse", rollouts };
    },

    async dequeueRollouts(init, options) {
      const req = create(DequeueRolloutsRequestSchema, init);
      const limit = req.limit ?? 1;
      checkCount(limit, limits.dequeueLimit, "rollouts requested");
      checkSeconds(req.waitSeconds, "wait_seconds", limits);
      if (req.workerId) checkId(req.workerId, "worker_id", limits);
      await ctx.maybeScan();
      const response = { $typeName: "agl.v1.DequeueRolloutsResponse" as const, rollouts: [] as Rollout[] };
      if (limit === 0) return response;
      const deadline = Date.now() + Math.max(0, req.waitSeconds) * 1000;
      let scope: ReturnType<typeof callScope> | undefined;
      for (;;) {
        // Armed before the claim, so that work queued after it wakes the wait. Without a timer or a signal until the
        // claim comes back empty: most claims find work.
        const queued = deadline > Date.now() ? ctx.waiters.arm((e) => e.kind === "queued", Number.POSITIVE_INFINITY) : undefined;
        try {
          response.rollouts = await claim(limit, req.workerId);
          if (response.rollouts.length > 0 || !queued) return response;
          scope ??= callScope(ctx, options);
          await sleep(deadline - Date.now(), { signal: scope.signal, wake: (done) => void queued.promise.then(done) });
        } finally {
          queued?.cancel();
        }
        scope.check();
        if (Date.now() >= deadline || scope.signal.aborted) return response;
      }
    },

    async startRollout(init) {
      const req = create(StartRolloutRequestSchema, init);
      if (req.workerId) checkId(req.workerId, "worker_id", limits);
      await ctx.maybeScan();
      return ctx.write(async (tx) => {
        const now = ctx.now();
        const spec = req.rollout ?? create(RolloutSpecSchema);
        const rollout = await buildRollout(tx, spec, RolloutStatus.PREPARING, await latestResources(tx));
        await tx.insertRollouts([rollout]);
        const attempt = await newAttempt(tx, rollout.rolloutId, req.workerId, now);
        await tx.insertAttempt(attempt);
        await syncAttemptWorker(tx, attempt, now);
        rollout.latestAttempt = attempt;
        return rollout;
      });
    },

    async startAttempt(init) {
      const req = create(StartAttemptRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      if (req.workerId) checkId(req.workerId, "worker_id", limits);
      await ctx.maybeScan();
      return ctx.write(async (tx) => {
        const now = ctx.now();
        const rollout = await requireRollout(tx, req.rolloutId);
        const attempt = await newAttempt(tx, rollout.rolloutId, req.workerId, now);
        await tx.insertAttempt(attempt);
        rollout.status = RolloutStatus.PREPARING;
        rollout.endTime = undefined;
        await tx.putRollout(rollout);
        await syncAttemptWorker(tx, attempt, now);
        rollout.latestAttempt = attempt;
        return rollout;
      });
    },

    async getRollout(init) {
      const req = create(GetRolloutRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      await ctx.maybeScan();
      return ctx.read(async (tx) => {
        const [rollout] = await withLatestAttempts(tx, [await requireRollout(tx, req.rolloutId)]);
        return rollout as Rollout;
      });
    },

    async queryRollouts(init) {
      const req = create(QueryRolloutsRequestSchema, init);
      for (const status of req.statusIn) checkEnum(status, RolloutStatus, "status_in");
      checkEnum(req.filterLogic, FilterLogic, "filter_logic", true);
      const page = toPageSpec(req.page, "rollouts", limits);
      const scope = rolloutScope(
        {
          modeIn: req.modeIn,
          resourcesIdIn: req.resourcesIdIn,
          resourcesVersion: req.resourcesVersion,
          startTimeFrom: req.startTimeFrom,
          startTimeTo: req.startTimeTo,
          endTimeFrom: req.endTimeFrom,
          endTimeTo: req.endTimeTo,
        },
        limits,
      );
      await ctx.maybeScan();
      return ctx.read(async (tx) => {
        const filter = {
          statusIn: req.statusIn,
          rolloutIdIn: req.rolloutIdIn,
          rolloutIdContains: req.rolloutIdContains || undefined,
          groupId: req.groupId || undefined,
          any: req.filterLogic === FilterLogic.OR,
          scope,
        };
        const result = await tx.queryRollouts(filter, page);
        const rewards =
          req.includeFinalRewards && result.items.length > 0 ? await tx.finalRewards(result.items.map((r) => r.rolloutId)) : undefined;
        return {
          $typeName: "agl.v1.QueryRolloutsResponse",
          rollouts: await withLatestAttempts(tx, result.items),
          page: pageInfo(result.total, page),
          finalRewards: rewards ? Object.fromEntries(rewards) : {},
        };
      });
    },

    async updateRollout(init) {
      const req = create(UpdateRolloutRequestSchema, init);
      checkId(req.rolloutId, "rollout_id", limits);
      if (req.status !== undefined) checkEnum(req.status, RolloutStatus, "status");
      if (req.mode !== undefined) checkEnum(req.mode, RolloutMode, "mode", true);
      if (req.config !== undefined) checkConfig(req.config, limits);
      checkValue(req.input, "input");
      checkStruct(req.metadata, "metadata");
      await ctx.maybeScan();
      return ctx.write(async (tx) => {
        const now = ctx.now();
        const rollout = await requireRollout(tx, req.rolloutId);
        if (req.resourcesId !== undefined) {
          rollout.resourcesVersion = await resourcesVersion(tx, req.resourcesId);
          rollout.resourcesId = req.resourcesId;
        }
        if (req.input !== undefined) rollout.input = req.input;
        if (req.mode !== undefined) rollout.mode = req.mode;
        if (req.metadata !== undefined) rollout.metadata = req.metadata;
        if (req.config !== undefined) {
          rollout.config = req.config;
          rollout.config.maxAttempts ||= 1;
        }
        if (req.status === undefined) await tx.putRollout(rollout);
        else {
          // Cancelling or requeuing ends the attempt still running: its runner learns it and stops the agent, and an
          // attempt handed back (or superseded by the next one) does not stay running, nor its worker busy.
          if (req.status === RolloutStatus.CANCELLED || isQueued(req.status)) await cancelLatestAttempt(tx, rollout.rolloutId, now);
          await writeRolloutStatus(tx, rollout, req.status, now);
        }
        const [updated] = await withLatestAttempts(tx, [rollout]);
        return updated as Rollout;
      });
    },

    async waitForRollouts(init, options) {
      const req = create(WaitForRolloutsRequestSchema, init);
      checkSeconds(req.timeoutSeconds, "timeout_seconds", limits);
      for (const id of req.rolloutIds) checkId(id, "rollout_ids[]", limits);
      await ctx.maybeScan();
      const scope = callScope(ctx, options);
      const deadline = Date.now() + Math.max(0, req.timeoutSeconds ?? Number.POSITIVE_INFINITY) * 1000;
      const pending = new Set(req.rolloutIds);
      const finished = new Map<string, Rollout>();
      // Each rollout is read once more when an event says it finished, so a wait on n rollouts costs O(n) reads.
      let named = new Set<string>();
      let wake: (() => void) | undefined;
      const stopListening = ctx.waiters.listen((event) => {
        if (event.kind !== "finished") return;
        for (const id of event.rolloutIds) if (pending.has(id)) named.add(id);
        if (named.size > 0) wake?.();
      });
      const readFinished = (ids: string[]) =>
        ctx.read(async (tx) => {
          const done: Rollout[] = [];
          for (const id of ids) {
            const rollout = await requireRollout(tx, id);
            if (isFinished(rollout.status)) done.push(rollout);
          }
          for (const rollout of await withLatestAttempts(tx, done)) {
            finished.set(rollout.rolloutId, rollout);
            pending.delete(rollout.rolloutId);
          }
        });
      try {
        await readFinished([...pending]);
        while (pending.size > 0 && Date.now() < deadline && !scope.signal.aborted) {
          if (named.size === 0) await sleep(deadline - Date.now(), { signal: scope.signal, wake: (done) => (wake = done) });
          wake = undefined;
          scope.check();
          const ids = [...named];
          named = new Set();
          await readFinished(ids);
        }
      } finally {
        stopListening();
      }
      const rollouts = req.rolloutIds.flatMap((id) => finished.get(id) ?? []);
      return { $typeName: "agl.v1.WaitForRolloutsResponse", rollouts };
    },
  };
}
