import { RewardMatch, type StreamTripletsRequest, type TripletOptions, TripletMode } from "../gen/agl/v1/triplets_pb.js";
import { RolloutMode } from "../gen/agl/v1/types_pb.js";
import { checkEnum } from "../store/validate.js";

/** Rejects `TripletOptions` whose enums hold values outside them (`INVALID_ARGUMENT`), like every store enum. */
export function checkTripletOptions(options: TripletOptions | undefined, field = "options"): void {
  if (!options) return;
  checkEnum(options.mode, TripletMode, `${field}.mode`, true);
  checkEnum(options.rewardMatch, RewardMatch, `${field}.reward_match`, true);
}

/** Rejects a `StreamTripletsRequest` whose enums hold values outside them (`INVALID_ARGUMENT`). */
export function checkStreamTripletsRequest(req: StreamTripletsRequest): void {
  checkEnum(req.rolloutMode, RolloutMode, "rollout_mode", true);
  checkTripletOptions(req.options);
}
