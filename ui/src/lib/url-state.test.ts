import { describe, expect, it } from "vitest";
import { DEFAULT_ROLLOUTS_QUERY, formatRoute, parseRoute, type Route, resourcesVersionRoute } from "./url-state.js";

describe("parseRoute", () => {
  it("reads every view", () => {
    expect(parseRoute("")).toEqual({ view: "overview" });
    expect(parseRoute("#/")).toEqual({ view: "overview" });
    expect(parseRoute("#/rollouts")).toEqual({ view: "rollouts", query: DEFAULT_ROLLOUTS_QUERY });
    expect(parseRoute("#/rollouts/ro-1%2Fx?attempt=at-2")).toEqual({ view: "rollout", rolloutId: "ro-1/x", attemptId: "at-2" });
    expect(parseRoute("#/resources?a=r1&b=r2")).toEqual({ view: "resources", a: "r1", b: "r2" });
    expect(parseRoute("#/resources?id=agl-policy&page=2&a=agl-policy@1&b=agl-policy@9")).toEqual({
      view: "resources",
      id: "agl-policy",
      page: 2,
      a: "agl-policy@1",
      b: "agl-policy@9",
    });
    expect(parseRoute("#/resources?id=p&page=-1")).toEqual({ view: "resources", id: "p" });
    expect(parseRoute("#/training?resources=main")).toEqual({ view: "training", resourcesId: "main" });
    expect(parseRoute("#/apo")).toEqual({ view: "apo" });
    expect(parseRoute("#/nope")).toEqual({ view: "not-found", path: "/nope" });
  });

  it("reads rollout filters, dropping values it does not know", () => {
    const route = parseRoute(
      "#/rollouts?status=failed,bogus,succeeded,failed&mode=val&resources=r&version=4&group=g&id=ro-&since=100&until=x&sort=end_time&order=asc&page=3&size=500",
    );
    expect(route).toEqual({
      view: "rollouts",
      query: {
        statuses: ["failed", "succeeded"],
        mode: "val",
        resourcesId: "r",
        resourcesVersion: 4,
        groupId: "g",
        idContains: "ro-",
        since: 100,
        sort: "end_time",
        order: "asc",
        page: 3,
        size: 500,
      },
    });
    expect(parseRoute("#/rollouts?sort=input&size=7&page=-1&mode=weird")).toEqual({ view: "rollouts", query: DEFAULT_ROLLOUTS_QUERY });
  });
});

describe("formatRoute", () => {
  it("leaves defaults out", () => {
    expect(formatRoute({ view: "rollouts", query: DEFAULT_ROLLOUTS_QUERY })).toBe("#/rollouts");
    expect(formatRoute({ view: "overview" })).toBe("#/");
    expect(formatRoute({ view: "training" })).toBe("#/training");
  });

  it("round-trips every route", () => {
    const routes: Route[] = [
      {
        view: "rollouts",
        query: { ...DEFAULT_ROLLOUTS_QUERY, statuses: ["running"], mode: "none", since: 5, until: 9, page: 2, size: 50, order: "asc" },
      },
      { view: "rollout", rolloutId: "a b/c", attemptId: "at" },
      { view: "resources", a: "x", b: "y z" },
      { view: "resources", id: "p@q", page: 3, a: "p@q@1", b: "p@q@12" },
      { view: "training", resourcesId: "main" },
      { view: "apo", runId: "run-1" },
    ];
    for (const route of routes) expect(parseRoute(formatRoute(route))).toEqual(route);
  });
});

describe("resourcesVersionRoute", () => {
  it("shows a version against the one before it, and version 1 as the id's history", () => {
    expect(formatRoute(resourcesVersionRoute("agl-policy", 3))).toBe("#/resources?id=agl-policy&a=agl-policy%402&b=agl-policy%403");
    expect(formatRoute(resourcesVersionRoute("agl-policy", 1))).toBe("#/resources?id=agl-policy");
  });
});
