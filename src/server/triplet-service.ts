import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { GetRolloutMessagesResponseSchema, TripletService } from "../gen/agl/v1/triplets_pb.js";
import { serviceRegistration, type ServiceRegistration } from "./service-registration.js";
import type { StoreApi } from "../store/store-api.js";
import { checkStreamTripletsRequest, checkTripletOptions } from "./check-triplet-request.js";
import { adapterOptions, rolloutMessages, rolloutTriplets } from "../triplets/rollout-triplets.js";
import { type StreamTripletsOptions, streamTriplets } from "../triplets/stream-triplets.js";

/** Options of {@link createTripletService}. */
export interface TripletServiceOptions extends StreamTripletsOptions {
  /** The store the triplets are read from: in process, or a client of another server (any backend works). */
  store: StoreApi;
}

const withSignal = (ctx: HandlerContext) => ({ signal: ctx.signal });

/**
 * The `TripletService` implementation; `startStoreServer` always serves it next to the store services.
 * It only reads the store through `StoreApi`, so it serves the same triplets over memory, SQLite or PostgreSQL.
 */
export function createTripletService(options: TripletServiceOptions): ServiceRegistration {
  const { store } = options;
  return serviceRegistration(TripletService, {
    async *streamTriplets(req, ctx) {
      checkStreamTripletsRequest(req);
      yield* streamTriplets(store, req, ctx.signal, options);
    },

    async getRolloutTriplets(req, ctx) {
      checkTripletOptions(req.options);
      const rollout = await store.getRollout({ rolloutId: req.rolloutId }, withSignal(ctx));
      return rolloutTriplets(store, rollout, req.attemptId || "latest", adapterOptions(req.options), undefined, ctx.signal);
    },

    async getRolloutMessages(req, ctx) {
      const rollouts = [];
      for (const rolloutId of req.rolloutIds) {
        const rollout = await store.getRollout({ rolloutId }, withSignal(ctx));
        rollouts.push(await rolloutMessages(store, rollout, ctx.signal));
      }
      return create(GetRolloutMessagesResponseSchema, { rollouts });
    },
  });
}
