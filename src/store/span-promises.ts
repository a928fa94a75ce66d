import { create } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import {
  AddSpansRequestSchema,
  type AddSpansResponse,
  AttemptDescriptionSchema,
  type ExpectSpansRequest,
  ExpectSpansRequestSchema,
} from "../gen/agl/v1/store_pb.js";
import { AttemptStatus, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { DeadlineTimer, expirePast } from "../core/deadline-timer.js";
import type { StorageTx } from "./backend.js";
import { requireRollout, type StoreContext } from "./context.js";
import { failedPrecondition, invalidArgument } from "./errors.js";
import type { StoreApi } from "./store-api.js";
import { checkCount, checkId } from "./validate.js";

const defaultTtlMs = 10_000;
const maxTtlMs = 60_000;
/** Rollouts remembered to exist at most (the oldest forgotten first). */
const maxKnownRollouts = 1 << 16;

type Held = Pick<StoreApi, "addSpans" | "updateAttempt" | "updateRollout">;
/** `AddSpans`; from an `AddSpansStream`, with the stream's {@link SpanHolder}, whose sender may take holds. */
export type AddSpansFrom = (...args: [...Parameters<StoreApi["addSpans"]>, holder?: SpanHolder]) => Promise<AddSpansResponse>;
type PromiseMethods = Omit<Held, "addSpans"> & Pick<StoreApi, "expectSpans"> & { addSpans: AddSpansFrom };

/** The sender of one `AddSpansStream`, as the holds it takes (`ExpectSpansRequest.hold`) see it. */
export interface SpanHolder {
  /**
   * Asks the sender to release a hold: a message the store sends on the stream unasked, or nothing once the stream
   * ended (the hold then lasts until its sender releases it on another stream, or until its TTL).
   */
  ask(release: ExpectSpansRequest): void;
}

/** A promise, or a hold: what the rollout's finishing updates wait for. */
type Entry = {
  settled: Promise<void>;
  settle(): void;
  /** Epoch ms. */
  deadline: number;
  /** A hold's: asks its sender to release it, once. */
  ask?: () => void;
};

const finishingAttempt = new Set([AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.TIMEOUT]);
const finishingRollout = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED]);

/** Resolves when `promise` does, or rejects when the caller gives up (its deadline passed, or it went away). */
function unlessAborted(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const abort = () =>
      reject(new ConnectError("the caller gave up while the rollout's promised spans were still coming", Code.DeadlineExceeded));
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    void promise.then(() => {
      signal.removeEventListener("abort", abort);
      resolve();
    });
  });
}

/**
 * `ExpectSpans`: spans promised by a component in another process (the standalone LLM proxy answers a call first and
 * stores its span right after). Until each promised span is stored (`AddSpans`), withdrawn, or its TTL passes, the
 * updates that finish the rollout's attempt or the rollout (`UpdateAttempt` to succeeded/failed/timeout,
 * `UpdateRollout` to succeeded/failed) wait, so an attempt cannot finish before its spans land. Heartbeats, reads and
 * cancellation never wait. Promises live in this process: a PostgreSQL store, which other servers share, refuses them.
 * Promises may also ride on `AddSpans` (`expect`): taken after its spans are stored, each reported in `expect_held`.
 * On an `AddSpansStream`, a hold stands for every span of the attempt its sender has yet to store: an update that
 * waits on it asks the sender to release it, which the sender does once it stored them.
 */
export function spanPromiseMethods(ctx: StoreContext, held: Held): PromiseMethods {
  const { limits } = ctx;
  /**
   * Rollouts known to exist: rollouts are never deleted, and their ids come only from the store once it committed
   * them, so a promise of a known rollout's spans needs no read (the LLM proxy promises every call's span).
   */
  const known = new Set<string>();
  const exists = (rolloutId: string) => {
    known.add(rolloutId);
    if (known.size > maxKnownRollouts) known.delete(known.values().next().value as string);
  };
  /** Per rollout and promised span id: the promise, how to settle it, and when its TTL ends (epoch ms). */
  const promised = new Map<string, Map<string, Entry>>();
  // One timer for every promise's TTL, not one a promise (the standalone proxy promises every call's span).
  const ttls = new DeadlineTimer((now) => {
    let next = Number.POSITIVE_INFINITY;
    for (const spans of promised.values())
      next = Math.min(
        next,
        expirePast(spans.values(), now, (entry) => entry.settle()),
      );
    return next;
  });

  const settle = (rolloutId: string, key: string) => promised.get(rolloutId)?.get(key)?.settle();
  const askOnce = ({ holder, release }: { holder: SpanHolder; release: ExpectSpansRequest }) => {
    let asked = false;
    return () => {
      if (!asked) holder.ask(release);
      asked = true;
    };
  };
  /** Holds are keyed apart from span ids: a span stored with a hold's id does not end the hold. */
  const holdKey = (holdId: string) => `hold\0${holdId}`;
  const promise = (rolloutId: string, key: string, ttlMs: number, hold?: { holder: SpanHolder; release: ExpectSpansRequest }) => {
    const deadline = Date.now() + ttlMs;
    const existing = hold && promised.get(rolloutId)?.get(key);
    if (existing) {
      // A hold taken again is renewed, not replaced: whoever waits on it waits for its release. It is asked for on
      // the stream that took it last.
      existing.deadline = Math.max(existing.deadline, deadline);
      existing.ask = askOnce(hold);
      ttls.add(existing.deadline);
      return;
    }
    settle(rolloutId, key); // a repeated promise replaces the earlier one
    const rolloutSpans = promised.get(rolloutId) ?? new Map<string, Entry>();
    promised.set(rolloutId, rolloutSpans);
    let resolve!: () => void;
    const entry: Entry = {
      settled: new Promise<void>((r) => (resolve = r)),
      settle() {
        if (rolloutSpans.get(key) === entry) rolloutSpans.delete(key);
        if (rolloutSpans.size === 0 && promised.get(rolloutId) === rolloutSpans) promised.delete(rolloutId);
        resolve();
      },
      deadline,
    };
    if (hold) entry.ask = askOnce(hold);
    rolloutSpans.set(key, entry);
    ttls.add(entry.deadline);
  };
  /** Resolves once every span promised so far for the rollout has settled. */
  const settled = (rolloutId: string, signal: AbortSignal | undefined): Promise<void> | undefined => {
    const spans = promised.get(rolloutId);
    if (!spans || spans.size === 0) return undefined;
    for (const entry of spans.values()) entry.ask?.();
    return unlessAborted(
      Promise.all([...spans.values()].map((e) => e.settled)).then(() => undefined),
      signal,
    );
  };
  /** Runs `call` now, or once the rollout's promised spans settle when the update finishes something. */
  const heldIf = <R>(finishing: boolean, rolloutId: string, options: CallOptions | undefined, call: () => Promise<R>) => {
    const wait = finishing && rolloutId ? settled(rolloutId, options?.signal) : undefined;
    return wait ? wait.then(call) : call();
  };

  /** Rejects a malformed promise (INVALID_ARGUMENT); `at` names where it sits in the request. */
  const checkPromise = (req: ExpectSpansRequest, at = "") => {
    checkId(req.rolloutId, `${at}rollout_id`, limits);
    checkId(req.attemptId, `${at}attempt_id`, limits);
    checkCount(req.spanIds.length, limits.spansPerBatch, `${at}span_ids`);
    for (const [i, spanId] of req.spanIds.entries()) checkId(spanId, `${at}span_ids[${i}]`, limits);
    if (req.ttlMs > maxTtlMs) throw invalidArgument(`${at}ttl_ms: at most ${maxTtlMs}, got ${req.ttlMs}`);
    if (req.hold && req.spanIds.length !== 1)
      throw invalidArgument(`${at}span_ids: a hold is named by one id of the sender's, got ${req.spanIds.length}`);
  };
  /** Holds (or withdraws) a checked promise; FAILED_PRECONDITION on PostgreSQL, NOT_FOUND for an unknown rollout. */
  const take = async (req: ExpectSpansRequest, holder?: SpanHolder) => {
    if (req.hold && !req.withdraw && !holder) throw failedPrecondition("a hold is taken on AddSpansStream only");
    if (ctx.backend.name === "postgres") {
      throw failedPrecondition(
        "a PostgreSQL store cannot hold span promises (another server may take the rollout's updates): store the spans first",
      );
    }
    const keyOf = req.hold ? holdKey : (spanId: string) => spanId;
    if (req.withdraw) {
      for (const spanId of req.spanIds) settle(req.rolloutId, keyOf(spanId));
    } else {
      if (!known.has(req.rolloutId)) {
        await ctx.read((tx) => requireRollout(tx, req.rolloutId));
        exists(req.rolloutId);
      }
      const ttlMs = req.ttlMs || defaultTtlMs;
      const hold =
        holder && req.hold ? { holder, release: create(ExpectSpansRequestSchema, { ...req, ttlMs: 0, withdraw: true }) } : undefined;
      for (const spanId of req.spanIds) promise(req.rolloutId, keyOf(spanId), ttlMs, hold);
    }
  };

  /** What an LLM proxy checks of an attempt before it serves the attempt's first call (`describe_attempt`). */
  const describe = async (tx: StorageTx, req: ExpectSpansRequest) => {
    const rollout = await tx.getRollout(req.rolloutId);
    if (rollout) exists(req.rolloutId);
    const attempt = rollout && (await tx.getAttempt(req.rolloutId, req.attemptId));
    const tokenIn = rollout?.metadata?.agl_token_in;
    return create(AttemptDescriptionSchema, {
      rolloutExists: rollout !== undefined,
      attemptExists: attempt !== undefined,
      resourcesId: rollout?.resourcesId ?? "",
      tokenIn: typeof tokenIn === "boolean" ? tokenIn : undefined,
    });
  };
  /**
   * The description of each entry that asks for one, all read in one transaction (the proxy gathers them), side by
   * side: PostgreSQL then pipelines the reads on the transaction's connection rather than waiting out each.
   */
  const describeAll = (entries: readonly ExpectSpansRequest[]) =>
    ctx.read((tx) => Promise.all(entries.map((entry) => (entry.describeAttempt ? describe(tx, entry) : undefined))));

  return {
    async expectSpans(init) {
      const req = create(ExpectSpansRequestSchema, init);
      checkPromise(req);
      await take(req);
      return { $typeName: "agl.v1.ExpectSpansResponse" };
    },

    async addSpans(init, options, holder) {
      const req = create(AddSpansRequestSchema, init);
      checkCount(req.expect.length, limits.spansPerBatch, "expect");
      for (const [i, entry] of req.expect.entries()) checkPromise(entry, `expect[${i}].`);
      // Read before the spans are stored: a failed read fails the call before it changed anything.
      const described = req.expect.some((entry) => entry.describeAttempt) ? await describeAll(req.expect) : undefined;
      const response = await held.addSpans(req, options);
      if (promised.size > 0) for (const ack of response.acks) settle(ack.rolloutId, ack.spanId);
      // Taken once the spans are stored, so a failed call holds nothing; a promise the store cannot take is
      // reported not held (its sender then stores that span before answering), never a failure of the stored spans.
      for (const [i, entry] of req.expect.entries()) {
        const attempt = described?.[i];
        const taken = attempt && !attempt.rolloutExists ? Promise.reject() : take(entry, holder);
        response.expectHeld.push(
          await taken.then(
            () => true,
            () => false,
          ),
        );
      }
      if (described) response.expectAttempts = described.map((attempt) => attempt ?? create(AttemptDescriptionSchema));
      if (req.expect.some((entry) => entry.hold)) response.holds = true;
      return response;
    },

    // No await when nothing is promised: the call then starts in this tick, in the order the caller made it.
    updateAttempt(init, options) {
      const finishing = init.status !== undefined && finishingAttempt.has(init.status);
      return heldIf(finishing, init.rolloutId ?? "", options, () => held.updateAttempt(init, options));
    },

    updateRollout(init, options) {
      const finishing = init.status !== undefined && finishingRollout.has(init.status);
      return heldIf(finishing, init.rolloutId ?? "", options, () => held.updateRollout(init, options));
    },
  };
}
