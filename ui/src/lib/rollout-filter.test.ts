import { describe, expect, it } from "vitest";
import { RolloutMode, RolloutStatus, SortOrder } from "../../../src/gen/agl/v1/types_pb.js";
import { pageWindow, toggleSort, toQueryRolloutsRequest, withFilter } from "./rollout-filter.js";
import { DEFAULT_ROLLOUTS_QUERY, type RolloutsQuery } from "./url-state.js";

describe("toQueryRolloutsRequest", () => {
  it("maps every filter, the order and the page onto the request", () => {
    const query: RolloutsQuery = {
      statuses: ["failed", "succeeded"],
      mode: "val",
      resourcesId: "res-1",
      resourcesVersion: 3,
      groupId: "g",
      idContains: "ro-",
      since: 100,
      until: 200,
      sort: "end_time",
      order: "asc",
      page: 2,
      size: 50,
    };
    expect(toQueryRolloutsRequest(query)).toEqual({
      statusIn: [RolloutStatus.FAILED, RolloutStatus.SUCCEEDED],
      modeIn: [RolloutMode.VAL],
      resourcesIdIn: ["res-1"],
      resourcesVersion: 3,
      rolloutIdContains: "ro-",
      groupId: "g",
      startTimeFrom: 100,
      startTimeTo: 200,
      page: { sortBy: "end_time", sortOrder: SortOrder.ASC, limit: 50, offset: 100 },
      includeFinalRewards: true,
    });
  });

  it("sends no filter for the defaults and maps mode none to unspecified", () => {
    const request = toQueryRolloutsRequest(DEFAULT_ROLLOUTS_QUERY);
    expect(request).toMatchObject({ statusIn: [], modeIn: [], resourcesIdIn: [], rolloutIdContains: "", groupId: "" });
    expect(request).not.toHaveProperty("startTimeFrom");
    expect(toQueryRolloutsRequest({ ...DEFAULT_ROLLOUTS_QUERY, mode: "none" }).modeIn).toEqual([RolloutMode.UNSPECIFIED]);
  });

  it("turns an inverted time range into an empty one rather than an error", () => {
    const request = toQueryRolloutsRequest({ ...DEFAULT_ROLLOUTS_QUERY, since: 200, until: 100 });
    expect(request.startTimeFrom).toBe(200);
    expect(request.startTimeTo).toBeGreaterThan(200);
  });
});

describe("pageWindow", () => {
  it("gives the rows shown and the number of pages", () => {
    const q = { ...DEFAULT_ROLLOUTS_QUERY, size: 100, page: 1 };
    expect(pageWindow(q, 100_000)).toEqual({ from: 101, to: 200, total: 100_000, pages: 1000 });
    expect(pageWindow(q, 150)).toEqual({ from: 101, to: 150, total: 150, pages: 2 });
    expect(pageWindow(q, 0)).toEqual({ from: 0, to: 0, total: 0, pages: 1 });
  });
});

describe("withFilter and toggleSort", () => {
  it("goes back to the first page and drops cleared filters", () => {
    const q = withFilter({ ...DEFAULT_ROLLOUTS_QUERY, page: 4, groupId: "g" }, { groupId: "", mode: "train" });
    expect(q).toEqual({ ...DEFAULT_ROLLOUTS_QUERY, mode: "train" });
  });

  it("flips the order of the sorted column and sorts a new one descending", () => {
    const q = { ...DEFAULT_ROLLOUTS_QUERY, page: 3 };
    expect(toggleSort(q, "start_time")).toMatchObject({ sort: "start_time", order: "asc", page: 0 });
    expect(toggleSort(q, "status")).toMatchObject({ sort: "status", order: "desc", page: 0 });
  });
});
