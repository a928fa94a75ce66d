import { create } from "@bufbuild/protobuf";
import { encodeMessage } from "../encoding/generated-encoder.js";
import { decodeMessage } from "../encoding/generated-decoder.js";
import { Code, ConnectError, type Transport, type UnaryResponse } from "@connectrpc/connect";
import { DeadlineTimer, expirePast } from "../core/deadline-timer.js";
import { CallStream, type CallRequest, CallRequestSchema } from "../gen/agl/v1/calls_pb.js";

/** Options of {@link withCallStream}. */
export interface CallStreamTransportOptions {
  /** The stream ends after this long without a call in flight (an open stream keeps the process alive). Default 250. */
  idleMs?: number;
  /** Larger requests go as calls of their own, whose limit the stream's framing would otherwise eat into. Default 1 MiB. */
  maxRequestBytes?: number;
  /**
   * Calls on the stream at once; more go as calls of their own. Below the server's cap on a stream (256), so long
   * waits (`WaitForRollouts`, `DequeueRollouts`) on the stream never hold back the call that would end them. Default 128.
   */
  maxInFlight?: number;
}

type Waiter = {
  resolve(bytes: Uint8Array): void;
  reject(error: ConnectError): void;
  unary(): void;
  /** Epoch ms; `Infinity`: none. */
  deadline: number;
  expire(): void;
};
type Open = {
  send(request: CallRequest): void;
  end(): void;
  waiting: Map<number, Waiter>;
  headerKey: string;
  /** The deadlines of the calls waiting, and when the stream has been idle long enough: a timer each, not one a call. */
  deadlines: DeadlineTimer;
  idle: DeadlineTimer;
  idleSince: number;
};

const headerKeyOf = (header: Headers) => JSON.stringify([...header]);

/**
 * A transport whose unary calls are messages of one `CallStream` to the server (`proto/agl/v1/calls.proto`), each
 * answered by id: a message on an open stream costs either side a fraction of a unary call's own HTTP/2 stream
 * (docs/benchmarks.md). Streaming calls go to `inner` as they are.
 * The stream opens with the first call, and again after it ended or failed; a failure fails the calls then in
 * flight with its error, as a lost connection fails unary calls (`UNAVAILABLE` when the server ended the stream). A
 * server without `CallStream` (`UNIMPLEMENTED`) is asked once: those calls and every later one are plain calls.
 * A call's deadline and abort are kept here and sent on to the server, which ends the call there too.
 */
export function withCallStream(inner: Transport, options: CallStreamTransportOptions = {}): Transport & { close(): void } {
  const idleMs = options.idleMs ?? 250;
  const maxRequestBytes = options.maxRequestBytes ?? 1024 * 1024;
  const maxInFlight = options.maxInFlight ?? 128;
  let unsupported = false;
  let closed = false;
  let nextId = 0;
  let open: Open | undefined;

  const start = (header: Headers, headerKey: string): Open => {
    const stop = new AbortController();
    const queue: CallRequest[] = [];
    let wake: (() => void) | undefined;
    let ending = false;
    const stream: Open = {
      waiting: new Map(),
      headerKey,
      deadlines: new DeadlineTimer((now) => expirePast(stream.waiting.values(), now, (waiter) => waiter.expire())),
      idle: new DeadlineTimer((now) => {
        if (stream.waiting.size > 0) return Number.POSITIVE_INFINITY; // armed again when the calls are done
        if (now < stream.idleSince + idleMs) return stream.idleSince + idleMs;
        if (open === stream) open = undefined;
        stream.end();
        return Number.POSITIVE_INFINITY;
      }),
      idleSince: 0,
      send(request) {
        queue.push(request);
        wake?.();
      },
      end() {
        ending = true;
        wake?.();
      },
    };
    async function* requests() {
      while (!stop.signal.aborted) {
        while (queue.length > 0) yield queue.shift() as CallRequest;
        if (ending) return;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
    }
    void (async () => {
      let failure: ConnectError;
      try {
        const response = await inner.stream(CallStream.method.calls, stop.signal, undefined, header, requests(), undefined);
        for await (const answer of response.message) {
          const waiter = stream.waiting.get(answer.id);
          if (!waiter) continue;
          stream.waiting.delete(answer.id);
          if (answer.errorCode) waiter.reject(new ConnectError(answer.errorMessage, answer.errorCode as Code));
          else waiter.resolve(answer.response);
          if (stream.waiting.size === 0) idleSoon(stream);
        }
        failure = new ConnectError("the server ended the call stream", Code.Unavailable);
      } catch (error) {
        failure = ConnectError.from(error);
      }
      if (open === stream) open = undefined;
      stream.idle.stop();
      stream.deadlines.stop();
      stop.abort();
      if (failure.code === Code.Unimplemented) unsupported = true;
      for (const waiter of stream.waiting.values()) {
        if (unsupported) waiter.unary();
        else waiter.reject(failure);
      }
      stream.waiting.clear();
    })();
    return stream;
  };

  // A stream without calls ends after `idleMs`; a call meanwhile keeps it.
  const idleSoon = (stream: Open) => {
    stream.idleSince = Date.now();
    stream.idle.add(stream.idleSince + idleMs);
  };

  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const headers = new Headers(header);
      const request = create(method.input, input);
      const plain = () => inner.unary(method, signal, timeoutMs, headers, request, contextValues);
      if (unsupported || closed) return plain();
      const headerKey = headerKeyOf(headers);
      if (open && (open.headerKey !== headerKey || open.waiting.size >= maxInFlight)) return plain();
      const bytes = encodeMessage(method.input, request);
      if (bytes.byteLength > maxRequestBytes) return plain();
      if (signal?.aborted) return Promise.reject(new ConnectError("call aborted", Code.Canceled));
      open ??= start(headers, headerKey);
      const stream = open;
      nextId = (nextId % 0xffff_ffff) + 1;
      const id = nextId;
      return new Promise<UnaryResponse<never, never>>((resolve, reject) => {
        const settle = () => signal?.removeEventListener("abort", onAbort);
        const giveUp = (error: ConnectError) => {
          if (stream.waiting.get(id) !== waiter) return;
          stream.waiting.delete(id);
          settle();
          stream.send(create(CallRequestSchema, { id, cancel: true }));
          if (stream.waiting.size === 0) idleSoon(stream);
          reject(error);
        };
        const onAbort = () => giveUp(new ConnectError("call aborted", Code.Canceled));
        const deadline = timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : Number.POSITIVE_INFINITY;
        const waiter: Waiter = {
          deadline,
          expire: () => giveUp(new ConnectError(`the deadline of ${timeoutMs} ms was exceeded`, Code.DeadlineExceeded)),
          resolve(answer) {
            settle();
            try {
              const message = decodeMessage(method.output, answer);
              resolve({ stream: false, service: method.parent, method, header: new Headers(), message, trailer: new Headers() } as never);
            } catch (error) {
              reject(new ConnectError(`cannot decode ${method.output.typeName}: ${(error as Error).message}`, Code.Internal));
            }
          },
          reject(error) {
            settle();
            reject(error);
          },
          unary() {
            settle();
            const left = deadline === Number.POSITIVE_INFINITY ? timeoutMs : Math.max(1, deadline - Date.now());
            inner.unary(method, signal, left, headers, request, contextValues).then(resolve as never, reject);
          },
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        stream.waiting.set(id, waiter);
        stream.deadlines.add(deadline);
        stream.send(
          create(CallRequestSchema, {
            id,
            method: `${method.parent.typeName}/${method.name}`,
            request: bytes,
            timeoutMs: Math.min(Math.ceil(timeoutMs ?? 0), 0xffff_ffff),
          }),
        );
      });
    },

    stream: (...args) => inner.stream(...args),

    close() {
      closed = true;
      open?.end();
      open = undefined;
    },
  };
}
