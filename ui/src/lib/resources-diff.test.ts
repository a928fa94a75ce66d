import { create, fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { type Resource, ResourceSchema, TemplateEngine } from "../../../src/gen/agl/v1/types_pb.js";
import { diffResources } from "./resources-diff.js";

const template = (text: string, engine = TemplateEngine.F_STRING): Resource =>
  create(ResourceSchema, { kind: { case: "promptTemplate", value: { template: text, engine } } });
const llm = (endpoint: string, model: string, apiKey = ""): Resource =>
  create(ResourceSchema, { kind: { case: "llm", value: { endpoint, model, apiKey } } });
const json = (value: unknown): Resource => create(ResourceSchema, { kind: { case: "json", value: fromJson(ValueSchema, value as never) } });

describe("diffResources", () => {
  it("diffs prompt templates line by line and lists changes first", () => {
    const diffs = diffResources(
      { prompt: template("You are helpful.\nAnswer: {q}"), same: template("x") },
      { prompt: template("You are concise.\nAnswer: {q}"), same: template("x") },
    );
    expect(diffs.map((d) => [d.name, d.change])).toEqual([
      ["prompt", "changed"],
      ["same", "same"],
    ]);
    expect(diffs[0]?.rows?.[0]).toEqual({
      left: { no: 1, text: "You are helpful.", kind: "removed" },
      right: { no: 1, text: "You are concise.", kind: "added" },
    });
  });

  it("counts a template engine change as a change", () => {
    const [d] = diffResources({ p: template("{{ q }}", TemplateEngine.F_STRING) }, { p: template("{{ q }}", TemplateEngine.JINJA) });
    expect(d?.change).toBe("changed");
    expect(d?.fields).toEqual([{ field: "engine", a: "f-string", b: "jinja", changed: true }]);
  });

  it("diffs LLM endpoints field by field without revealing API keys", () => {
    const [d] = diffResources({ main: llm("http://a/v1", "m1", "secret-1") }, { main: llm("http://b/v1", "m1", "secret-2") });
    expect(d?.change).toBe("changed");
    expect(d?.fields).toEqual([
      { field: "endpoint", a: "http://a/v1", b: "http://b/v1", changed: true },
      { field: "model", a: "m1", b: "m1", changed: false },
      { field: "api_key", a: "(set)", b: "(set)", changed: false },
      { field: "sampling_parameters", a: "", b: "", changed: false },
    ]);
    expect(JSON.stringify(d)).not.toContain("secret");
  });

  it("reports added and removed resources and diffs JSON as text", () => {
    const diffs = diffResources({ old: template("a"), cfg: json({ k: 1 }) }, { cfg: json({ k: 2 }), fresh: llm("http://x", "m") });
    expect(diffs.map((d) => [d.name, d.change, d.kind])).toEqual([
      ["cfg", "changed", "json"],
      ["fresh", "added", "llm"],
      ["old", "removed", "prompt_template"],
    ]);
  });
});
