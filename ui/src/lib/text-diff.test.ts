import { describe, expect, it } from "vitest";
import { hasChanges, sideBySide } from "./text-diff.js";

describe("sideBySide", () => {
  it("pairs an edited line with its new version and numbers both sides", () => {
    const rows = sideBySide("a\nb\nc\n", "a\nB\nc\nd\n");
    expect(rows).toEqual([
      { left: { no: 1, text: "a", kind: "same" }, right: { no: 1, text: "a", kind: "same" } },
      { left: { no: 2, text: "b", kind: "removed" }, right: { no: 2, text: "B", kind: "added" } },
      { left: { no: 3, text: "c", kind: "same" }, right: { no: 3, text: "c", kind: "same" } },
      { right: { no: 4, text: "d", kind: "added" } },
    ]);
    expect(hasChanges(rows)).toBe(true);
  });

  it("shows removed lines with nothing beside them", () => {
    expect(sideBySide("x\ny", "x")).toEqual([
      { left: { no: 1, text: "x", kind: "same" }, right: { no: 1, text: "x", kind: "same" } },
      { left: { no: 2, text: "y", kind: "removed" } },
    ]);
  });

  it("finds no change between equal texts", () => {
    expect(hasChanges(sideBySide("same\ntext", "same\ntext"))).toBe(false);
    expect(sideBySide("", "")).toEqual([]);
  });
});
