/**
 * Shared helpers of the conformance suite: opening a store over a backend with a fake clock, building requests,
 * asserting ConnectError codes and asserting that a rejected call left the stored data unchanged.
 */
import { create, fromJson, toJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, expect } from "vitest";
import type { StorageBackend, StoreEvent } from "../../src/store/backend.js";
import { createStore, type Store, type StoreOptions } from "../../src/store/store.js";
import {
  type RolloutConfigSchema,
  type RolloutSpecSchema,
  type Rollout,
  RolloutMode,
  type Span,
  SpanSchema,
  StatusCode,
} from "../../src/gen/agl/v1/types_pb.js";
import type { BackendDef } from "./backends.js";

/** A clock in epoch seconds that moves only when told to. */
export class FakeClock {
  t = 1_700_000_000;
  readonly now = (): number => this.t;
  advance(seconds: number): void {
    this.t += seconds;
  }
}

export interface Harness {
  store: Store;
  backend: StorageBackend;
  clock: FakeClock;
}

export interface OpenOptions extends Partial<Omit<StoreOptions, "backend" | "now">> {
  /** Use the wall clock instead of the fake one (for tests about blocking waits). */
  realClock?: boolean;
}

const opened: Harness[] = [];

afterEach(async () => {
  const all = opened.splice(0);
  for (const h of all.reverse()) {
    try {
      await h.store.close();
    } finally {
      await h.backend.close();
    }
  }
});

/**
 * A store over a fresh backend. Defaults: fake clock, watchdog on every call (debounce 0), no background timer.
 * Closed (store and backend) after the test.
 */
export async function openStore(def: BackendDef, options: OpenOptions = {}): Promise<Harness> {
  const { realClock, ...rest } = options;
  const backend = await def.create();
  const clock = new FakeClock();
  const store = createStore({
    backend,
    scanDebounceSeconds: 0,
    watchdogIntervalSeconds: 0,
    ...(realClock ? {} : { now: clock.now }),
    ...rest,
  });
  const h = { store, backend, clock };
  opened.push(h);
  return h;
}

export const json = (value: JsonValue): Value => fromJson(ValueSchema, value);
export const unjson = (value: Value | undefined): JsonValue | undefined => (value === undefined ? undefined : toJson(ValueSchema, value));

export type SpecInit = MessageInitShape<typeof RolloutSpecSchema>;
export type SpanInit = MessageInitShape<typeof SpanSchema>;

/** The optional fields of a rollout spec, as plain init values. */
export interface SpecExtra {
  mode?: RolloutMode;
  resourcesId?: string;
  config?: MessageInitShape<typeof RolloutConfigSchema>;
  metadata?: JsonObject;
  groupId?: string;
}

export function spec(input: JsonValue = {}, extra: SpecExtra = {}): SpecInit {
  return { input: json(input), mode: RolloutMode.TRAIN, ...extra };
}

/** Enqueues `n` rollouts (inputs {i}) in one call; returns them in order. */
export async function enqueueN(store: Store, n: number, extra: SpecExtra = {}): Promise<Rollout[]> {
  const res = await store.enqueueRollouts({ rollouts: Array.from({ length: n }, (_, i) => spec({ i }, extra)) });
  return res.rollouts;
}

/** Starts a rollout (attempt #1 preparing) and returns it with its attempt. */
export async function startRollout(
  store: Store,
  extra: SpecExtra = {},
  workerId = "",
): Promise<{ rollout: Rollout; rolloutId: string; attemptId: string }> {
  const rollout = await store.startRollout({ rollout: spec({ started: true }, extra), workerId });
  return { rollout, rolloutId: rollout.rolloutId, attemptId: rollout.latestAttempt!.attemptId };
}

let spanCounter = 0;
/** A fresh span id (16 lowercase hex). */
export const newSpanId = (): string => (++spanCounter).toString(16).padStart(16, "0");
export const TRACE_A = "0123456789abcdef0123456789abcdef";
export const TRACE_B = "fedcba9876543210fedcba9876543210";

export interface SpanOptions {
  spanId?: string;
  traceId?: string;
  parentId?: string;
  name?: string;
  sequenceId?: number;
  startTime?: number;
  endTime?: number;
}

export function makeSpan(rolloutId: string, attemptId: string, o: SpanOptions = {}): Span {
  const spanId = o.spanId ?? newSpanId();
  const traceId = o.traceId ?? TRACE_A;
  return create(SpanSchema, {
    rolloutId,
    attemptId,
    sequenceId: o.sequenceId ?? 0,
    traceId,
    spanId,
    parentId: o.parentId ?? "",
    name: o.name ?? "span",
    status: { code: StatusCode.OK },
    startTime: o.startTime,
    endTime: o.endTime,
    context: { traceId, spanId },
  });
}

/** Adds one span for the attempt and returns its ack. */
export async function addSpan(store: Store, rolloutId: string, attemptId: string, o: SpanOptions = {}) {
  const res = await store.addSpans({ spans: [makeSpan(rolloutId, attemptId, o)] });
  return res.acks[0]!;
}

/** Asserts that `promise` rejects with a ConnectError of `code` whose message matches every pattern. */
export async function expectCode(promise: Promise<unknown>, code: Code, ...patterns: Array<string | RegExp>): Promise<ConnectError> {
  let error: unknown;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  expect(error, `expected a ConnectError ${Code[code]}`).toBeInstanceOf(ConnectError);
  const ce = error as ConnectError;
  expect(Code[ce.code], `code of "${ce.rawMessage}"`).toBe(Code[code]);
  for (const p of patterns) {
    if (typeof p === "string") expect(ce.rawMessage).toContain(p);
    else expect(ce.rawMessage).toMatch(p);
  }
  return ce;
}

/**
 * Everything a caller can read back from the store (except uptime): rollouts with their attempts and spans,
 * workers, resources, the latest snapshot, and statistics (queue length, counts).
 */
export async function snapshot(store: Store): Promise<unknown> {
  const rollouts = (await store.queryRollouts({})).rollouts;
  const perRollout = [];
  for (const r of rollouts) {
    perRollout.push({
      attempts: (await store.queryAttempts({ rolloutId: r.rolloutId })).attempts,
      spans: (await store.querySpans({ rolloutId: r.rolloutId })).spans,
    });
  }
  const stats = await store.getStatistics({});
  return {
    rollouts,
    perRollout,
    workers: (await store.queryWorkers({})).workers,
    resources: (await store.queryResources({})).resources,
    latest: (await store.getLatestResources({})).resources,
    stats: { ...stats, uptimeSeconds: 0 },
  };
}

/** Runs `reject` (which must reject with `code`) and asserts that nothing readable changed. */
export async function expectRejectedUnchanged(
  store: Store,
  call: () => Promise<unknown>,
  code: Code,
  ...patterns: Array<string | RegExp>
): Promise<ConnectError> {
  const before = await snapshot(store);
  const error = await expectCode(call(), code, ...patterns);
  expect(await snapshot(store)).toEqual(before);
  return error;
}

/** Resolves with the first event matching `pred` delivered by the backend, or rejects after `ms`. */
export function nextEvent(backend: StorageBackend, pred: (e: StoreEvent) => boolean, ms: number): Promise<StoreEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`no matching store event within ${ms} ms`));
    }, ms);
    const unsubscribe = backend.subscribe((e) => {
      if (pred(e)) {
        clearTimeout(timer);
        unsubscribe();
        resolve(e);
      }
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Milliseconds `fn` took, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

export const ids = (items: Array<{ rolloutId: string }>) => items.map((r) => r.rolloutId);

/** Rejects when `p` has not settled within `ms` (so a hanging call fails fast instead of at the test timeout). */
export const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
};
