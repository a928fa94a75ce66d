import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { answerConcurrently } from "../core/concurrent-answers.js";
import { type AddSpansRequestSchema, type AddSpansStreamResponse, AddSpansStreamResponseSchema } from "../gen/agl/v1/store_pb.js";
import type { AddSpansFrom, SpanHolder } from "./span-promises.js";
import type { StoreApi } from "./store-api.js";

/** Requests of one stream in progress at once; the stream reads no further until one is answered. */
const maxInFlight = 64;

/**
 * `AddSpansStream` over a store's `addSpans`: each request of the stream is stored as `AddSpans` would store it, at
 * most {@link maxInFlight} at once, and answered with its id as it completes; a request that fails is answered with
 * its error and the stream goes on. The stream is its sender's {@link SpanHolder}: the store's requests to release a
 * hold go out between the answers (`release`, id 0). The stream ends once its requests have ended and every one is
 * answered; a failure of the stream itself (the caller went away) ends it with that error.
 */
export function addSpansStreamMethod(addSpans: AddSpansFrom): StoreApi["addSpansStream"] {
  return (requests, options) => {
    let send: ((message: AddSpansStreamResponse) => void) | undefined;
    const holder: SpanHolder = { ask: (release) => send?.(create(AddSpansStreamResponseSchema, { release: [release] })) };
    return answerConcurrently(
      requests,
      async (request: MessageInitShape<typeof AddSpansRequestSchema>) => {
        const id = request.id ?? 0;
        try {
          return create(AddSpansStreamResponseSchema, { id, response: await addSpans(request, options, holder) });
        } catch (error) {
          const e = ConnectError.from(error);
          return create(AddSpansStreamResponseSchema, { id, errorCode: e.code || Code.Unknown, errorMessage: e.rawMessage });
        }
      },
      maxInFlight,
      (unasked) => (send = unasked),
    );
  };
}
