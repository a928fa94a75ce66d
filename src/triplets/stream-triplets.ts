import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type RolloutTriplets,
  type StreamTripletsRequest,
  type StreamTripletsResponse,
  StreamTripletsResponseSchema,
} from "../gen/agl/v1/triplets_pb.js";
import { type Rollout, RolloutMode, RolloutStatus } from "../gen/agl/v1/types_pb.js";
import { sleep } from "../core/retry.js";
import type { StoreApi } from "../store/store-api.js";
import { openCursor } from "./cursor.js";
import { adapterOptions, rolloutTriplets } from "./rollout-triplets.js";

/** Options of {@link streamTriplets}. */
export interface StreamTripletsOptions {
  /** How often a `follow` stream looks for newly finished rollouts (default 250 ms). */
  pollIntervalMs?: number;
  /** Rollouts read per store query (default 500). */
  pageSize?: number;
  /** Messages built ahead of the consumer, so store reads overlap with sending (default 2). */
  prefetch?: number;
}

const finished = new Set([RolloutStatus.SUCCEEDED, RolloutStatus.FAILED, RolloutStatus.CANCELLED]);

/** A key of the filters that decide which rollouts a cursor covers. */
function filterKey(req: StreamTripletsRequest): string {
  return JSON.stringify([
    [...req.rolloutIds].sort(),
    req.groupId,
    req.rolloutMode,
    [...req.statusIn].sort(),
    req.resourcesId,
    req.resourcesVersion,
  ]);
}

/**
 * The triplet stream over any `StoreApi`: walks the matching rollouts in creation order and sends each one once it
 * has finished, with a cursor after every message. Rollouts that finish out of order are sent when found, and the
 * cursor remembers them, so a resumed stream neither repeats nor skips one. Messages are built as the consumer takes
 * them, at most `prefetch` ahead (the server pulls the generator only after the previous message was written). With `follow`, the
 * stream keeps polling for newly finished rollouts; a `caught_up` message marks the end of each burst.
 */
export async function* streamTriplets(
  store: StoreApi,
  req: StreamTripletsRequest,
  signal?: AbortSignal,
  options: StreamTripletsOptions = {},
): AsyncGenerator<StreamTripletsResponse> {
  for (const status of req.statusIn) {
    if (!finished.has(status)) {
      throw new ConnectError(
        `status_in: ${RolloutStatus[status] ?? status} is not a finished status (succeeded, failed, cancelled)`,
        Code.InvalidArgument,
      );
    }
  }
  const cursor = openCursor(req.cursor, filterKey(req));
  const adapter = adapterOptions(req.options);
  const pageSize = options.pageSize ?? 500;
  const statuses = new Set(req.statusIn);
  const resources = { resourcesId: req.resourcesId, resourcesVersion: req.resourcesVersion };
  const wanted = (r: Rollout) =>
    (req.rolloutMode === RolloutMode.UNSPECIFIED || r.mode === req.rolloutMode) && (statuses.size === 0 || statuses.has(r.status));
  const prefetch = options.prefetch ?? 2;
  let announce = true;
  // Rollouts taken in creation order; their messages are built up to `prefetch` ahead and sent in order.
  const queue: { position: number; build: Promise<RolloutTriplets> | undefined }[] = [];
  async function* send(keep: number) {
    while (queue.length > keep) {
      const { position, build } = queue.shift() as (typeof queue)[number];
      const message = build && (await build);
      cursor.complete(position);
      if (!message) continue;
      announce = true;
      yield create(StreamTripletsResponseSchema, { rollout: message, cursor: cursor.current() });
    }
  }
  while (!signal?.aborted) {
    let offset = cursor.watermark;
    for (;;) {
      const page = await store.queryRollouts(
        { rolloutIdIn: req.rolloutIds, groupId: req.groupId, page: { offset, limit: pageSize } },
        signal ? { signal } : {},
      );
      for (const [i, rollout] of page.rollouts.entries()) {
        const position = offset + i;
        if (!cursor.pending(position) || !finished.has(rollout.status)) continue;
        const build = wanted(rollout) ? rolloutTriplets(store, rollout, "latest", adapter, resources, signal) : undefined;
        // Awaited in order later; until then a failure must not count as unhandled.
        build?.catch(() => {});
        queue.push({ position, build });
        yield* send(prefetch);
      }
      if (page.rollouts.length < pageSize) break;
      offset += pageSize;
    }
    yield* send(0);
    if (announce) {
      announce = false;
      yield create(StreamTripletsResponseSchema, { cursor: cursor.current(), caughtUp: true });
    }
    if (!req.follow) return;
    await sleep(options.pollIntervalMs ?? 250, { signal });
  }
}
