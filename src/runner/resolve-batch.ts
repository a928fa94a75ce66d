import type { ResourcesData } from "../agent/resources.js";
import type { Rollout } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { withRetries } from "./retry.js";

/**
 * Fetches the resources of a batch of claimed rollouts: each distinct snapshot once, and the latest snapshot for
 * rollouts that name none. A rollout whose snapshot cannot be read maps to the error (its attempt fails with it).
 */
export async function resolveBatchResources(store: StoreApi, rollouts: readonly Rollout[]): Promise<Map<string, ResourcesData | Error>> {
  const bySnapshot = new Map<string, Promise<ResourcesData | Error>>();
  const load = (resourcesId: string) => {
    let pending = bySnapshot.get(resourcesId);
    if (!pending) {
      pending = (async () => {
        try {
          if (resourcesId === "") {
            const { resources } = await withRetries(() => store.getLatestResources({}));
            return resources
              ? { resourcesId: resources.resourcesId, version: resources.version, resources: resources.resources }
              : { resourcesId: "", version: 0, resources: {} };
          }
          const update = await withRetries(() => store.getResources({ resourcesId }));
          return { resourcesId: update.resourcesId, version: update.version, resources: update.resources };
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          return new Error(`cannot read resources ${resourcesId || "(latest)"}: ${reason}`);
        }
      })();
      bySnapshot.set(resourcesId, pending);
    }
    return pending;
  };
  const out = new Map<string, ResourcesData | Error>();
  await Promise.all(rollouts.map(async (r) => out.set(r.rolloutId, await load(r.resourcesId))));
  return out;
}
