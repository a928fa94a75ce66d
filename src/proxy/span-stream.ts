import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, Code, ConnectError } from "@connectrpc/connect";
import {
  type AddSpansRequestSchema,
  type AddSpansResponse,
  AddSpansResponseSchema,
  type ExpectSpansRequest,
} from "../gen/agl/v1/store_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { DeadlineTimer, expirePast } from "../core/deadline-timer.js";
import type { Logger } from "../core/logger.js";

type Request = MessageInitShape<typeof AddSpansRequestSchema>;
type Waiting = {
  resolve(response: AddSpansResponse): void;
  reject(error: ConnectError): void;
  unary(): void;
  /** Epoch ms; `Infinity`: none. */
  deadline: number;
  expire(): void;
};

/** What the holds taken on the stream (`ExpectSpansRequest.hold`) need to hear from it. */
export interface SpanStreamEvents {
  /** The store asks for these holds to be released (`AddSpansStreamResponse.release`). */
  release(entries: ExpectSpansRequest[]): void;
  /** A stream ended: the holds taken on it ended with it. */
  ended(): void;
}

/** `addSpans` over one `AddSpansStream` to the store, and how to close it. */
export interface SpanStream {
  addSpans(request: Request, options?: CallOptions): Promise<AddSpansResponse>;
  /** Closes the stream once the batches in flight are answered; later batches are plain `AddSpans` calls. */
  close(): void;
}

/**
 * `addSpans` through one `AddSpansStream` held open to a store in another process: each batch is a message on the
 * stream rather than a call of its own (about a quarter of a unary call's CPU on either side, measured in
 * docs/benchmarks.md), answered by id. The stream opens on first use and again after it failed; a failure fails the
 * batches then in flight with its error, as a lost connection fails unary calls (`UNAVAILABLE` when the store ended
 * the stream). A store without the method (`UNIMPLEMENTED`) is asked once: those batches and every later one go as
 * plain `AddSpans` calls. A batch with `timeoutMs` fails with `DEADLINE_EXCEEDED` when no answer came in time.
 */
export function createSpanStream(store: StoreApi, logger: Logger, events?: SpanStreamEvents): SpanStream {
  let unsupported = false;
  let closing = false;
  let nextId = 0;
  let open: { send(request: Request): void; waiting: Map<number, Waiting>; deadlines: DeadlineTimer; stop: AbortController } | undefined;

  const start = () => {
    const stop = new AbortController();
    const queue: Request[] = [];
    let wake: (() => void) | undefined;
    const waiting = new Map<number, Waiting>();
    // One timer for the batches' deadlines, not one a batch: each span stream message would arm and clear its own.
    const deadlines = new DeadlineTimer((now) => expirePast(waiting.values(), now, (waiter) => waiter.expire()));
    stop.signal.addEventListener("abort", () => wake?.(), { once: true });
    const stream = {
      waiting,
      deadlines,
      stop,
      send(request: Request) {
        queue.push(request);
        wake?.();
      },
    };
    async function* requests() {
      while (!stop.signal.aborted) {
        while (queue.length > 0) yield queue.shift() as Request;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    }
    void (async () => {
      let failure: ConnectError;
      try {
        for await (const answer of store.addSpansStream(requests(), { signal: stop.signal })) {
          if (answer.release.length > 0) events?.release(answer.release);
          const waiter = waiting.get(answer.id);
          if (!waiter) continue;
          waiting.delete(answer.id);
          if (answer.errorCode) waiter.reject(new ConnectError(answer.errorMessage, answer.errorCode as Code));
          else waiter.resolve(answer.response ?? create(AddSpansResponseSchema));
          if (closing && waiting.size === 0) stop.abort();
        }
        failure = new ConnectError("the store ended the span stream", Code.Unavailable);
      } catch (error) {
        failure = ConnectError.from(error);
      }
      if (open === stream) open = undefined;
      stop.abort();
      deadlines.stop();
      events?.ended();
      if (failure.code === Code.Unimplemented && !unsupported) {
        unsupported = true;
        logger.info(`the store does not take AddSpansStream (${failure.rawMessage}); each span batch is an AddSpans call`);
      }
      for (const waiter of waiting.values()) {
        if (unsupported) waiter.unary();
        else waiter.reject(failure);
      }
      waiting.clear();
    })();
    return stream;
  };

  return {
    addSpans(request, options) {
      if (unsupported || closing) return store.addSpans(request, options);
      open ??= start();
      const stream = open;
      nextId = (nextId % 0xffff_ffff) + 1;
      const id = nextId;
      return new Promise<AddSpansResponse>((resolve, reject) => {
        const timeoutMs = options?.timeoutMs;
        const waiter: Waiting = {
          resolve,
          reject,
          unary: () => void store.addSpans(request, options).then(resolve, reject),
          deadline: timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : Number.POSITIVE_INFINITY,
          expire() {
            stream.waiting.delete(id);
            reject(new ConnectError(`no answer from the store's span stream within ${timeoutMs} ms`, Code.DeadlineExceeded));
          },
        };
        stream.waiting.set(id, waiter);
        stream.deadlines.add(waiter.deadline);
        stream.send({ ...request, id });
      });
    },
    // Batches in flight are still answered; the stream closes after the last.
    close() {
      closing = true;
      if (open && open.waiting.size === 0) open.stop.abort();
    },
  };
}
