import type { MessageInitShape } from "@bufbuild/protobuf";
import type { QueryRolloutsRequestSchema } from "../../../src/gen/agl/v1/store_pb.js";
import { SortOrder } from "../../../src/gen/agl/v1/types_pb.js";
import { ROLLOUT_MODES, ROLLOUT_STATUSES } from "./names.js";
import type { RolloutsQuery } from "./url-state.js";

export type QueryRolloutsInit = MessageInitShape<typeof QueryRolloutsRequestSchema>;

/**
 * The QueryRollouts request for what the rollouts view shows: every filter is applied by the store (AND), sorted
 * and paged there, with the final rewards of the page. The browser never pages through the whole store.
 */
export function toQueryRolloutsRequest(query: RolloutsQuery): QueryRolloutsInit {
  const request: QueryRolloutsInit = {
    statusIn: query.statuses.map((s) => ROLLOUT_STATUSES[s]),
    modeIn: query.mode === undefined ? [] : [ROLLOUT_MODES[query.mode]],
    resourcesIdIn: query.resourcesId === undefined ? [] : [query.resourcesId],
    resourcesVersion: query.resourcesVersion ?? 0,
    rolloutIdContains: query.idContains ?? "",
    groupId: query.groupId ?? "",
    page: {
      sortBy: query.sort,
      sortOrder: query.order === "asc" ? SortOrder.ASC : SortOrder.DESC,
      limit: query.size,
      offset: query.page * query.size,
    },
    includeFinalRewards: true,
  };
  if (query.since !== undefined) request.startTimeFrom = query.since;
  // The store wants the upper bound above the lower one; an inverted range is sent as an empty one.
  if (query.until !== undefined)
    request.startTimeTo = query.since !== undefined && query.until <= query.since ? query.since + 1e-6 : query.until;
  return request;
}

/** The rows a page shows, as `from–to of total` (1-based); `0 of 0` for an empty result. */
export function pageWindow(
  query: Pick<RolloutsQuery, "page" | "size">,
  total: number,
): { from: number; to: number; total: number; pages: number } {
  const pages = Math.max(1, Math.ceil(total / query.size));
  if (total === 0) return { from: 0, to: 0, total, pages };
  const from = Math.min(total, query.page * query.size + 1);
  return { from, to: Math.min(total, (query.page + 1) * query.size), total, pages };
}

/** The query with one filter changed: back to the first page, since the old page may not exist any more. */
export function withFilter(query: RolloutsQuery, change: Partial<Omit<RolloutsQuery, "page">>): RolloutsQuery {
  const next: RolloutsQuery = { ...query, ...change, page: 0 };
  for (const key of Object.keys(change) as (keyof RolloutsQuery)[]) {
    if (next[key] === undefined || next[key] === "") delete next[key];
  }
  return next;
}

/** Clicking a column header: a new column sorts descending; the same column flips its order. */
export function toggleSort(query: RolloutsQuery, field: RolloutsQuery["sort"]): RolloutsQuery {
  if (query.sort === field) return { ...query, order: query.order === "asc" ? "desc" : "asc", page: 0 };
  return { ...query, sort: field, order: "desc", page: 0 };
}
