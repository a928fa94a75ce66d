import { versionKey } from "./snapshot-choices.js";
import { isRolloutModeName, isRolloutStatusName, type RolloutModeName, type RolloutStatusName } from "./names.js";

/** Fields the rollouts table sorts by (the store's sortable rollout fields). */
export const ROLLOUT_SORT_FIELDS = [
  "rollout_id",
  "start_time",
  "end_time",
  "status",
  "mode",
  "resources_id",
  "resources_version",
  "group_id",
] as const;
export type RolloutSortField = (typeof ROLLOUT_SORT_FIELDS)[number];
export const PAGE_SIZES = [50, 100, 500, 1000] as const;

/** What the rollouts view shows: filters, order and page, all kept in the URL. */
export interface RolloutsQuery {
  statuses: RolloutStatusName[];
  mode?: RolloutModeName;
  resourcesId?: string;
  /** With resourcesId: only rollouts created against this version of it. */
  resourcesVersion?: number;
  groupId?: string;
  idContains?: string;
  /** Start time bounds, epoch seconds. */
  since?: number;
  until?: number;
  sort: RolloutSortField;
  order: "asc" | "desc";
  /** 0-based. */
  page: number;
  size: number;
}

export const DEFAULT_ROLLOUTS_QUERY: RolloutsQuery = { statuses: [], sort: "start_time", order: "desc", page: 0, size: 100 };

/** A dashboard location (the part after `#`). */
export type Route =
  | { view: "overview" }
  | { view: "rollouts"; query: RolloutsQuery }
  | { view: "rollout"; rolloutId: string; attemptId?: string }
  /** id: the snapshot whose history is shown, page: its page (0-based); a, b: the diffed pair (snapshot keys). */
  | { view: "resources"; id?: string; page?: number; a?: string; b?: string }
  | { view: "training"; resourcesId?: string }
  | { view: "apo"; runId?: string }
  | { view: "not-found"; path: string };

export type ViewName = Exclude<Route["view"], "not-found">;

/** The resources view on one version of a snapshot id: its history, and that version against the one before it. */
export function resourcesVersionRoute(resourcesId: string, version: number): Route {
  if (version <= 1) return { view: "resources", id: resourcesId };
  return { view: "resources", id: resourcesId, a: versionKey(resourcesId, version - 1), b: versionKey(resourcesId, version) };
}

/** Reads a location hash (`#/rollouts?status=failed`); anything unreadable falls back to defaults, never throws. */
export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, "");
  const [pathPart = "", search = ""] = raw.split("?", 2);
  const params = new URLSearchParams(search);
  const segments = pathPart.split("/").filter((s) => s !== "");
  const [head, second] = segments;
  const param = (name: string) => params.get(name) || undefined;
  if (head === undefined) return { view: "overview" };
  if (head === "rollouts" && second !== undefined && segments.length === 2) {
    const attemptId = param("attempt");
    return { view: "rollout", rolloutId: safeDecode(second), ...(attemptId ? { attemptId } : {}) };
  }
  if (segments.length > 1) return { view: "not-found", path: pathPart };
  switch (head) {
    case "rollouts":
      return { view: "rollouts", query: parseRolloutsQuery(params) };
    case "resources":
      return withDefined({
        view: "resources" as const,
        id: param("id"),
        page: nonNegativeInteger(params.get("page")) || undefined,
        a: param("a"),
        b: param("b"),
      });
    case "training":
      return withDefined({ view: "training" as const, resourcesId: param("resources") });
    case "apo":
      return withDefined({ view: "apo" as const, runId: param("run") });
    default:
      return { view: "not-found", path: pathPart };
  }
}

/** The hash of a route, `#/…`, with default values left out so URLs stay short and stable. */
export function formatRoute(route: Route): string {
  switch (route.view) {
    case "overview":
      return "#/";
    case "rollouts":
      return withSearch("#/rollouts", rolloutsQueryParams(route.query));
    case "rollout":
      return withSearch(`#/rollouts/${encodeURIComponent(route.rolloutId)}`, compact({ attempt: route.attemptId }));
    case "resources":
      return withSearch(
        "#/resources",
        compact({ id: route.id, page: route.page ? String(route.page) : undefined, a: route.a, b: route.b }),
      );
    case "training":
      return withSearch("#/training", compact({ resources: route.resourcesId }));
    case "apo":
      return withSearch("#/apo", compact({ run: route.runId }));
    case "not-found":
      return `#/${route.path}`;
  }
}

function parseRolloutsQuery(params: URLSearchParams): RolloutsQuery {
  const statuses = (params.get("status") ?? "").split(",").filter(isRolloutStatusName);
  const mode = params.get("mode") ?? "";
  const sort = params.get("sort") ?? "";
  const size = Number(params.get("size"));
  const query: RolloutsQuery = {
    ...DEFAULT_ROLLOUTS_QUERY,
    statuses: [...new Set(statuses)],
    sort: (ROLLOUT_SORT_FIELDS as readonly string[]).includes(sort) ? (sort as RolloutSortField) : DEFAULT_ROLLOUTS_QUERY.sort,
    order: params.get("order") === "asc" ? "asc" : "desc",
    page: nonNegativeInteger(params.get("page")) ?? 0,
    size: (PAGE_SIZES as readonly number[]).includes(size) ? size : DEFAULT_ROLLOUTS_QUERY.size,
  };
  if (isRolloutModeName(mode)) query.mode = mode;
  for (const [key, name] of [
    ["resourcesId", "resources"],
    ["groupId", "group"],
    ["idContains", "id"],
  ] as const) {
    const value = params.get(name);
    if (value) query[key] = value;
  }
  const version = positiveNumber(params.get("version"));
  if (version !== undefined && Number.isInteger(version)) query.resourcesVersion = version;
  const since = positiveNumber(params.get("since"));
  const until = positiveNumber(params.get("until"));
  if (since !== undefined) query.since = since;
  if (until !== undefined) query.until = until;
  return query;
}

function rolloutsQueryParams(query: RolloutsQuery): Record<string, string> {
  const d = DEFAULT_ROLLOUTS_QUERY;
  return compact({
    status: query.statuses.length > 0 ? query.statuses.join(",") : undefined,
    mode: query.mode,
    resources: query.resourcesId,
    version: query.resourcesVersion?.toString(),
    group: query.groupId,
    id: query.idContains,
    since: query.since?.toString(),
    until: query.until?.toString(),
    sort: query.sort === d.sort ? undefined : query.sort,
    order: query.order === d.order ? undefined : query.order,
    page: query.page === 0 ? undefined : String(query.page),
    size: query.size === d.size ? undefined : String(query.size),
  });
}

function withSearch(path: string, params: Record<string, string>): string {
  const search = new URLSearchParams(params).toString();
  return search === "" ? path : `${path}?${search}`;
}

function compact(values: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""));
}

/** The route without keys whose value is undefined (exactOptionalPropertyTypes-friendly). */
function withDefined<T extends object>(route: T): T {
  return Object.fromEntries(Object.entries(route).filter(([, v]) => v !== undefined)) as T;
}

function nonNegativeInteger(text: string | null): number | undefined {
  const n = Number(text);
  return text !== null && text !== "" && Number.isInteger(n) && n >= 0 ? n : undefined;
}

function positiveNumber(text: string | null): number | undefined {
  const n = Number(text);
  return text !== null && text !== "" && Number.isFinite(n) && n > 0 ? n : undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
