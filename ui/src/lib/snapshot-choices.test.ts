import { describe, expect, it } from "vitest";
import { snapshotChoices } from "./snapshot-choices.js";

const snap = (resourcesId: string, version: number, updateTime: number) => ({ resourcesId, version, updateTime });

describe("snapshotChoices", () => {
  it("lists stored snapshots by id and older versions seen live by id@version, newest first", () => {
    const choices = snapshotChoices(
      [snap("policy", 3, 30), snap("other", 1, 5)],
      [snap("policy", 1, 10), snap("policy", 2, 20), snap("policy", 3, 30)],
    );
    expect([...choices.keys()]).toEqual(["policy", "policy@2", "policy@1", "other"]);
    expect(choices.get("policy@2")?.version).toBe(2);
  });

  it("keeps versions of ids the store no longer lists", () => {
    expect([...snapshotChoices([], [snap("gone", 4, 1)]).keys()]).toEqual(["gone@4"]);
  });
});
