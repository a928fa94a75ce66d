import type { ResourcesUpdate } from "../gen/agl/v1/types_pb.js";
import type { StoreApi } from "../store/store-api.js";
import { followResources } from "./backend-source.js";
import type { Logger } from "../core/logger.js";

/** The current version of each resources id, for stamping calls with the resources of the rollout they serve. */
export interface ResourceVersions {
  /** The latest version of `resourcesId` known (one store read the first time an id is seen; 0 when it cannot be read). */
  versionOf(resourcesId: string): Promise<number>;
  /** Takes note of an update from a watch of resources kept elsewhere. */
  observe(update: ResourcesUpdate): void;
  close(): void;
}

/**
 * Creates {@link ResourceVersions}: follows `WatchResources` (unless `follow` is false: a watch kept elsewhere then
 * feeds {@link ResourceVersions.observe}) so a new version of an id is known as soon as it is published, and reads an
 * id it has not seen yet with `GetResources`. The watch is re-established when it fails.
 */
export function createResourceVersions(store: StoreApi, logger: Logger, options: { follow?: boolean } = {}): ResourceVersions {
  const versions = new Map<string, number>();
  const reading = new Map<string, Promise<number>>();
  const closed = new AbortController();
  const observe = (update: ResourcesUpdate) => {
    if (update.version > (versions.get(update.resourcesId) ?? 0)) versions.set(update.resourcesId, update.version);
  };
  if (options.follow !== false) {
    followResources(store, { includeLatest: false }, closed.signal, observe, (error) =>
      logger.warn(`watching resource versions failed: ${String(error)}`),
    );
  }
  const read = async (resourcesId: string) => {
    try {
      observe(await store.getResources({ resourcesId }));
    } catch (error) {
      logger.warn(`cannot read the version of resources ${resourcesId}: ${String(error)}`);
    } finally {
      reading.delete(resourcesId);
    }
    return versions.get(resourcesId) ?? 0;
  };
  return {
    versionOf(resourcesId) {
      const known = versions.get(resourcesId);
      if (known !== undefined) return Promise.resolve(known);
      let pending = reading.get(resourcesId);
      if (!pending) {
        pending = read(resourcesId);
        reading.set(resourcesId, pending);
      }
      return pending;
    },
    observe,
    close: () => closed.abort(),
  };
}
