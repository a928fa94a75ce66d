import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { type Resource, ResourceSchema, ResourcesUpdateSchema } from "../../../src/gen/agl/v1/types_pb.js";
import { resourceChanges, versionHistory } from "./version-history.js";

const template = (text: string): Resource => create(ResourceSchema, { kind: { case: "promptTemplate", value: { template: text } } });
const llm = (model: string, temperature?: number): Resource =>
  create(ResourceSchema, {
    kind: {
      case: "llm",
      value: { endpoint: "http://e/v1", model, ...(temperature === undefined ? {} : { samplingParameters: { temperature } }) },
    },
  });
const version = (n: number, resources: Record<string, Resource>) =>
  create(ResourcesUpdateSchema, { resourcesId: "policy", version: n, createTime: 1, updateTime: 10 + n, resources });

describe("versionHistory", () => {
  it("says which resources each version changed against the one before it, in the order given", () => {
    const v1 = version(1, { llm: llm("m-1"), prompt: template("a") });
    const v2 = version(2, { llm: llm("m-2"), prompt: template("a") });
    const v3 = version(3, { llm: llm("m-2", 0.7), prompt: template("a"), extra: template("x") });
    const v4 = version(4, { llm: llm("m-2", 0.7), extra: template("x") });
    const v5 = version(5, { llm: llm("m-2", 0.7), extra: template("x") });
    expect(versionHistory([v5, v4, v3, v2, v1])).toEqual([
      { version: 5, createTime: 1, updateTime: 15, changes: [] },
      { version: 4, createTime: 1, updateTime: 14, changes: [{ name: "prompt", change: "removed" }] },
      {
        version: 3,
        createTime: 1,
        updateTime: 13,
        changes: [
          { name: "extra", change: "added" },
          { name: "llm", change: "changed" },
        ],
      },
      { version: 2, createTime: 1, updateTime: 12, changes: [{ name: "llm", change: "changed" }] },
      {
        version: 1,
        createTime: 1,
        updateTime: 11,
        changes: [
          { name: "llm", change: "added" },
          { name: "prompt", change: "added" },
        ],
      },
    ]);
  });

  it("leaves the changes unknown when the previous version is not in the list (another page)", () => {
    const [entry] = versionHistory([version(7, { llm: llm("m") })]);
    expect(entry?.version).toBe(7);
    expect(entry?.changes).toBeUndefined();
  });
});

describe("resourceChanges", () => {
  it("compares resources field by field, a template's text included", () => {
    expect(resourceChanges({ p: template("a"), q: template("b") }, { p: template("a"), q: template("b ") })).toEqual([
      { name: "q", change: "changed" },
    ]);
  });
});
