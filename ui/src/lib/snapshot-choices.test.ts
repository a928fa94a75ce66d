import { describe, expect, it } from "vitest";
import { parseSnapshotKey, snapshotChoices, versionKey } from "./snapshot-choices.js";

const snap = (resourcesId: string, version: number, updateTime: number) => ({ resourcesId, version, updateTime });

describe("snapshotChoices", () => {
  it("lists stored snapshots by id and their other versions by id@version, newest first", () => {
    const choices = snapshotChoices(
      [snap("policy", 3, 30), snap("other", 1, 5)],
      [snap("policy", 1, 10), snap("policy", 2, 20), snap("policy", 3, 30), snap("policy", 2, 20)],
    );
    expect([...choices.keys()]).toEqual(["policy", "policy@2", "policy@1", "other"]);
    expect(choices.get("policy@2")?.version).toBe(2);
  });

  it("keeps versions of ids the store no longer lists", () => {
    expect([...snapshotChoices([], [snap("gone", 4, 1)]).keys()]).toEqual(["gone@4"]);
  });
});

describe("parseSnapshotKey", () => {
  it("reads id@version as that version and anything else as the current version of an id", () => {
    expect(parseSnapshotKey(versionKey("apo-r-best", 12))).toEqual({ resourcesId: "apo-r-best", version: 12 });
    expect(parseSnapshotKey("a@b@3")).toEqual({ resourcesId: "a@b", version: 3 });
    expect(parseSnapshotKey("agl-policy")).toEqual({ resourcesId: "agl-policy" });
    expect(parseSnapshotKey("x@0")).toEqual({ resourcesId: "x@0" });
    expect(parseSnapshotKey("@4")).toEqual({ resourcesId: "@4" });
  });
});
