import { create, fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { type Resource, ResourceSchema, RolloutStatus } from "../../../src/gen/agl/v1/types_pb.js";
import { APO_RECORD, apoScores, candidateTree, readApoRuns, type SnapshotLike } from "./apo-runs.js";

function snapshot(resourcesId: string, record: Record<string, unknown> | undefined, prompt: string, version = 1): SnapshotLike {
  const resources: Record<string, Resource> = {
    prompt: create(ResourceSchema, { kind: { case: "promptTemplate", value: { template: prompt } } }),
  };
  if (record) resources[APO_RECORD] = create(ResourceSchema, { kind: { case: "json", value: fromJson(ValueSchema, record as never) } });
  return { resourcesId, version, updateTime: 1, resources };
}

const snapshots = [
  snapshot("apo-run1-r1p0b1", { run: "run1", candidate: "r1p0b1", round: 1, parent: "seed", target: "prompt", critique: "too long" }, "B"),
  snapshot("apo-run1-seed", { run: "run1", candidate: "seed", fingerprint: "x" }, "seed text"),
  snapshot("apo-run1-r1p0b0", { run: "run1", candidate: "r1p0b0", round: 1, parent: "seed", target: "prompt", critique: "vague" }, "A"),
  snapshot("apo-run1-r2p0b0", { run: "run1", candidate: "r2p0b0", round: 2, parent: "r1p0b1", rejected: "no template" }, "B"),
  snapshot("apo-run1-best", { run: "run1", candidate: "r1p0b1", round: 2, score: 0.75 }, "B", 3),
  snapshot("other", undefined, "not apo"),
];

describe("readApoRuns", () => {
  it("reads the seed, the candidates in round order, and the best", () => {
    const [run] = readApoRuns(snapshots);
    expect(run?.run).toBe("run1");
    expect(run?.candidates.map((c) => c.key)).toEqual(["seed", "r1p0b0", "r1p0b1", "r2p0b0"]);
    expect(run?.seed?.templates).toEqual({ prompt: "seed text" });
    expect(run?.candidates[2]).toMatchObject({ parent: "seed", target: "prompt", critique: "too long", round: 1 });
    expect(run?.candidates[3]?.rejected).toBe("no template");
    expect(run?.best).toMatchObject({ candidate: "r1p0b1", round: 2, score: 0.75, version: 3, templates: { prompt: "B" } });
  });

  it("ignores snapshots APO did not publish", () => {
    expect(readApoRuns([snapshots[5] as SnapshotLike])).toEqual([]);
  });
});

describe("candidateTree", () => {
  it("hangs each candidate under its parent, with scores", () => {
    const [run] = readApoRuns(snapshots);
    const tree = candidateTree(run as never, new Map([["r1p0b1", 0.75]]));
    expect(tree).toEqual({
      name: "seed",
      children: [
        { name: "r1p0b0", children: [] },
        { name: "r1p0b1", value: 0.75, children: [{ name: "r2p0b0", children: [] }] },
      ],
    });
  });

  it("puts candidates with an unknown parent under the root", () => {
    const tree = candidateTree({ run: "x", candidates: [{ key: "r3p0b0", parent: "gone", round: 3, resourcesId: "", templates: {} }] });
    expect(tree).toEqual({ name: "seed", children: [{ name: "r3p0b0", children: [] }] });
  });
});

describe("apoScores", () => {
  const r = (rolloutId: string, groupId: string, status = RolloutStatus.SUCCEEDED) => ({ rolloutId, groupId, status });

  it("scores each batch as APO does: mean final reward, a rollout without one counting 0", () => {
    const scores = apoScores(
      "rooms",
      [
        r("a", "apo:rooms:full:seed"),
        r("b", "apo:rooms:full:seed", RolloutStatus.FAILED),
        r("c", "apo:rooms:r1:val:r1p0b0"),
        r("d", "apo:rooms:r1:val:r1p0b0"),
        r("e", "apo:rooms:r1:val:seed"),
        r("f", "apo:rooms:r1:val:seed", RolloutStatus.RUNNING),
        r("g", "apo:other:full:seed"),
        r("h", "apo:rooms:r1:train:seed"),
      ],
      { a: 0.9, c: 1, d: 0.5, e: 0.25, f: 1, g: 1, h: 1 },
    );
    expect(scores.full).toEqual(new Map([["seed", 0.45]]));
    expect(scores.rounds).toEqual([
      { key: "r1p0b0", round: 1, score: 0.75 },
      { key: "seed", round: 1, score: 0.25 },
    ]);
  });
});
