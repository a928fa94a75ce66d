import type { Message } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type * as grpc from "@grpc/grpc-js";
import { headersToMetadata } from "../encoding/grpc-headers.js";
import { abortError, hasHeaders } from "./grpc-metadata.js";

/** The write side of a grpc-js server-streaming or bidi call. */
export type GrpcWritable = grpc.ServerWritableStream<Uint8Array, Uint8Array> | grpc.ServerDuplexStream<Uint8Array, Uint8Array>;

const aborted = Symbol("aborted");

/**
 * Writes every message of `output` to `call`, sending response headers before the first one. Respects backpressure:
 * when grpc-js buffers too much, the next message is not pulled until the call drains. When the call's signal aborts
 * (client cancel, deadline, shutdown) the generator is stopped and the abort reason is thrown.
 */
export async function writeStream(
  call: GrpcWritable,
  output: AsyncIterable<Message>,
  serialize: (message: Message) => Uint8Array,
  ctx: HandlerContext,
): Promise<void> {
  const { signal } = ctx;
  const iterator = output[Symbol.asyncIterator]();
  // One abort listener for the whole stream, which ends whichever wait for a message is in progress: adding and
  // removing one for every message showed in the server's profiles (docs/benchmarks.md).
  let stopWaiting: ((stopped: typeof aborted) => void) | undefined;
  const onAbort = () => stopWaiting?.(aborted);
  signal.addEventListener("abort", onAbort, { once: true });
  let headerSent = false;
  try {
    for (;;) {
      if (signal.aborted) throw abortError(signal);
      const next = await new Promise<IteratorResult<Message> | typeof aborted>((resolve, reject) => {
        stopWaiting = resolve;
        iterator.next().then(resolve, reject);
      });
      stopWaiting = undefined;
      if (next === aborted) throw abortError(signal);
      if (next.done === true) break;
      const bytes = serialize(next.value);
      if (!headerSent) {
        headerSent = true;
        if (hasHeaders(ctx.responseHeader)) call.sendMetadata(headersToMetadata(ctx.responseHeader));
      }
      if (!call.write(bytes)) await drained(call, signal);
      if (signal.aborted) throw abortError(signal);
    }
    if (signal.aborted) throw abortError(signal);
  } finally {
    signal.removeEventListener("abort", onAbort);
    // Ends the implementation's generator (its finally blocks run) when we stop early.
    if (signal.aborted) iterator.return?.().catch(() => undefined);
  }
}

function drained(call: GrpcWritable, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off("drain", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    if (signal.aborted) return resolve();
    call.on("drain", done);
    signal.addEventListener("abort", done);
  });
}
