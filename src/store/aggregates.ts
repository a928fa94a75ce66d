import { Code, ConnectError } from "@connectrpc/connect";
import type { StoreContext } from "./context.js";
import type { StoreApi } from "./store-api.js";

type AggregateMethods = Pick<StoreApi, "getRolloutTimeline" | "getRewardsByResources">;

/** Aggregates the dashboard reads: rollout counts over time and rewards per resources version. */
export function aggregateMethods(_ctx: StoreContext): AggregateMethods {
  return {
    async getRolloutTimeline() {
      throw new ConnectError("GetRolloutTimeline is not implemented yet", Code.Unimplemented);
    },
    async getRewardsByResources() {
      throw new ConnectError("GetRewardsByResources is not implemented yet", Code.Unimplemented);
    },
  };
}
