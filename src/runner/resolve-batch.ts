import type { ResourcesData } from "../agent/resources.js";
import type { Rollout } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { withRetries } from "../core/retry.js";

/** A short-lived cache of snapshots, shared by the batches of one runner. */
export type ResourcesCache = Map<string, { at: number; data: Promise<ResourcesData | Error> }>;

/**
 * Fetches the resources of a batch of claimed rollouts: each distinct snapshot once (reusing one fetched less than
 * `cacheMs` ago), and the latest snapshot for rollouts that name none. A rollout whose snapshot cannot be read maps to
 * the error (its attempt fails with it).
 */
export async function resolveBatchResources(
  store: StoreApi,
  rollouts: readonly Rollout[],
  cache: ResourcesCache = new Map(),
  cacheMs = 0,
): Promise<Map<string, ResourcesData | Error>> {
  const now = Date.now();
  if (cache.size > 64) for (const [id, entry] of cache) if (now - entry.at > cacheMs) cache.delete(id);
  const load = (resourcesId: string) => {
    const cached = cache.get(resourcesId);
    let pending = cached && now - cached.at <= cacheMs ? cached.data : undefined;
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
      cache.set(resourcesId, { at: now, data: pending });
      // Errors are not worth keeping.
      void pending.then((data) => data instanceof Error && cache.delete(resourcesId));
    }
    return pending;
  };
  const out = new Map<string, ResourcesData | Error>();
  await Promise.all(rollouts.map(async (r) => out.set(r.rolloutId, await load(r.resourcesId))));
  return out;
}
