import { Code, ConnectError } from "@connectrpc/connect";
import { isTransientStoreError, type RetryOptions, withRetries } from "../core/retry.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AttemptDescription, ExpectSpansRequestSchema, SpanAck } from "../gen/agl/v1/store_pb.js";
import type { Span } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";

/** Options of {@link writeSpans}. */
export interface WriteSpansOptions {
  /** Spans per AddSpans call. Default 10,000. */
  maxPerCall?: number;
  /** Deadline of one AddSpans call. Default: the store client's. */
  callTimeoutMs?: number;
  /** How transient failures are retried. Default: one try. */
  retry?: RetryOptions;
  /** Span promises to send with the first call (`AddSpans.expect`); the result's `expectHeld` says which the store took. */
  expect?: MessageInitShape<typeof ExpectSpansRequestSchema>[];
}

/** Spans the store did not take, and why. */
export interface RefusedSpans {
  spans: Span[];
  /** The last error: a code the store refused them with, or the transient failure retries did not get past. */
  error: ConnectError;
  /** The store refused them (an error retrying cannot fix); otherwise retries gave up. */
  refused: boolean;
  /** Calls made for these spans. */
  tries: number;
}

/** What {@link writeSpans} did. */
export interface WriteSpansResult {
  /** One per span the store took (new or duplicate), in the order the calls were answered. */
  acks: SpanAck[];
  /** Spans not stored, grouped by the failure that kept them out. */
  failed: RefusedSpans[];
  /**
   * The store's `expect_held` for the call that carried `expect`: one per entry, true where it holds that promise;
   * empty from a store that does not read `expect`; undefined when that call failed (or there were no promises).
   */
  expectHeld?: boolean[];
  /** The store's `expect_attempts` for that call: one per entry when any asked for `describe_attempt`. */
  expectAttempts?: AttemptDescription[];
  /** The store's `holds` for that call: it read the holds among the promises. */
  holds?: boolean;
}

/**
 * Writes spans to the store with AddSpans, the one way agl's producers (the runner's shipper and final report, the
 * LLM proxy, OTLP ingest) store spans. Retries are safe because AddSpans is idempotent by span id: a batch whose
 * answer was lost is sent again and the store acknowledges the copies as duplicates. A refused call takes no more
 * spans with it than it must: a batch mixing attempts is split per attempt (one bad attempt, say deleted, must not
 * drop the others' spans), and a batch too large for the store is halved until only the spans too large alone are left.
 */
export async function writeSpans(store: StoreApi, spans: readonly Span[], options: WriteSpansOptions = {}): Promise<WriteSpansResult> {
  const expect = options.expect ?? [];
  const result: WriteSpansResult = { acks: [], failed: [] };
  const maxPerCall = options.maxPerCall ?? 10_000;
  // One call at a time, so the store numbers the spans in the order they were given. The promises ride on the first
  // call only (the only call when there are no spans): a call the store refused took none of them, and they are not
  // sent again.
  for (let i = 0; i < spans.length || (i === 0 && expect.length > 0); i += maxPerCall) {
    await writeBatch(store, spans.slice(i, i + maxPerCall), { ...options, expect: i === 0 ? expect : [] }, result);
  }
  return result;
}

const attemptOf = (span: Span) => `${span.rolloutId}\0${span.attemptId}`;

async function writeBatch(store: StoreApi, batch: Span[], options: WriteSpansOptions, result: WriteSpansResult): Promise<void> {
  const callOptions = options.callTimeoutMs === undefined ? {} : { timeoutMs: options.callTimeoutMs };
  let tries = 1;
  try {
    const expect = options.expect ?? [];
    const request = expect.length > 0 ? { spans: batch, expect } : { spans: batch };
    const response = await withRetries(() => store.addSpans(request, callOptions), {
      tries: 1,
      ...options.retry,
      onRetry(error, n) {
        tries = n + 1;
        options.retry?.onRetry?.(error, n);
      },
    });
    result.acks.push(...response.acks);
    if (expect.length > 0) {
      result.expectHeld = response.expectHeld;
      result.expectAttempts = response.expectAttempts;
      result.holds = response.holds;
    }
    return;
  } catch (thrown) {
    const error = ConnectError.from(thrown);
    if (batch.length === 0) return; // only promises: not held, as the result already says
    if (isTransientStoreError(error)) return void result.failed.push({ spans: batch, error, refused: false, tries });
    const parts = { ...options, expect: [] }; // the promises were not taken; they are not sent again
    const perAttempt = new Map<string, Span[]>();
    for (const span of batch) {
      const group = perAttempt.get(attemptOf(span));
      if (group) group.push(span);
      else perAttempt.set(attemptOf(span), [span]);
    }
    if (perAttempt.size > 1)
      return void (await Promise.all([...perAttempt.values()].map((part) => writeBatch(store, part, parts, result))));
    if (error.code === Code.ResourceExhausted && batch.length > 1) {
      const half = Math.ceil(batch.length / 2);
      return void (await Promise.all([
        writeBatch(store, batch.slice(0, half), parts, result),
        writeBatch(store, batch.slice(half), parts, result),
      ]));
    }
    result.failed.push({ spans: batch, error, refused: true, tries });
  }
}
