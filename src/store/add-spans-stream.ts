import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type AddSpansRequestSchema, type AddSpansStreamResponse, AddSpansStreamResponseSchema } from "../gen/agl/v1/store_pb.js";
import type { StoreApi } from "./store-api.js";

/** Requests of one stream in progress at once; the stream reads no further until one is answered. */
const maxInFlight = 64;

/**
 * `AddSpansStream` over a store's `addSpans`: each request of the stream is stored as `AddSpans` would store it, at
 * most {@link maxInFlight} at once, and answered with its id as it completes; a request that fails is answered with
 * its error and the stream goes on. The stream ends once its requests have ended and every one is answered; a failure
 * of the stream itself (the caller went away) ends it with that error.
 */
export function addSpansStreamMethod(addSpans: StoreApi["addSpans"]): StoreApi["addSpansStream"] {
  return (requests, options) => answers(requests, addSpans, options);
}

async function* answers(
  requests: AsyncIterable<MessageInitShape<typeof AddSpansRequestSchema>>,
  addSpans: StoreApi["addSpans"],
  options: Parameters<StoreApi["addSpansStream"]>[1],
): AsyncIterable<AddSpansStreamResponse> {
  const ready: AddSpansStreamResponse[] = [];
  let inFlight = 0;
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const signal = () => {
    wake?.();
    wake = undefined;
  };
  const waitForNews = () => new Promise<void>((resolve) => (wake = resolve));
  let room: (() => void) | undefined;
  const answer = async (request: MessageInitShape<typeof AddSpansRequestSchema>) => {
    const id = request.id ?? 0;
    try {
      ready.push(create(AddSpansStreamResponseSchema, { id, response: await addSpans(request, options) }));
    } catch (error) {
      const e = ConnectError.from(error);
      ready.push(create(AddSpansStreamResponseSchema, { id, errorCode: e.code || Code.Unknown, errorMessage: e.rawMessage }));
    }
    inFlight--;
    room?.();
    room = undefined;
    signal();
  };
  const reading = (async () => {
    try {
      for await (const request of requests) {
        if (inFlight >= maxInFlight) await new Promise<void>((resolve) => (room = resolve));
        inFlight++;
        void answer(request);
      }
    } catch (error) {
      failure = error;
    } finally {
      ended = true;
      signal();
    }
  })();
  while (true) {
    while (ready.length > 0) yield ready.shift() as AddSpansStreamResponse;
    if (failure !== undefined) throw failure;
    if (ended && inFlight === 0) break;
    await waitForNews();
  }
  await reading;
}
