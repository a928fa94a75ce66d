/**
 * Triplets (`agl/triplets`), for trainers that read training data: the `TripletService` client (a resumable stream of
 * finished rollouts and their triplets from any store server), the same stream over a store in process, and the
 * `agl.v1` messages a triplet is defined by.
 *
 * @example
 * ```ts
 * import { createTripletClient, TripletMode } from "agl/triplets";
 * const triplets = createTripletClient({ baseUrl: "http://127.0.0.1:4747" });
 * for await (const m of triplets.streamTriplets({ follow: true, cursor, options: { mode: TripletMode.TRAJECTORY } })) …
 * ```
 * @module
 */
export { createTripletClient } from "./triplets/triplet-client.js";
export type { TripletClient, TripletClientOptions } from "./triplets/triplet-client.js";

/** The stream the service sends, read from a `StoreApi` directly (a store in process, or a store client). */
export { streamTriplets } from "./triplets/stream-triplets.js";
export type { StreamTripletsOptions } from "./triplets/stream-triplets.js";

/** One definition of a triplet: the `agl.v1` messages the adapter builds and the `TripletService` sends. */
export { TripletMode, RewardMatch } from "./gen/agl/v1/triplets_pb.js";
export type { Triplet, TripletStats, TripletOptions, RolloutTriplets, StreamTripletsResponse } from "./gen/agl/v1/triplets_pb.js";
