import type { JsonValue } from "@bufbuild/protobuf";
import { describe, expect, test } from "vitest";
import { AglError } from "../../core/errors.js";
import { checkSeedTemplate, editDefect, probeVariables, usedVariables } from "./placeholders.js";

const tasks: JsonValue[] = [
  { q: "a", n: 1, extra: true },
  { q: "b", n: 2 },
];

describe("probeVariables", () => {
  test("fields every task has, plus extra names", () => {
    expect(probeVariables(tasks, ["rooms"])).toEqual({ q: "a", n: 1, rooms: "<rooms>" });
    expect(probeVariables(["plain", "strings"])).toEqual({});
  });
});

describe("checkSeedTemplate", () => {
  const probe = probeVariables(tasks);
  test("accepts known placeholders, f-string and jinja", () => {
    expect(() => checkSeedTemplate("p", { template: "Q: {q} ({n:d})", engine: "f-string" }, probe)).not.toThrow();
    expect(() => checkSeedTemplate("p", { template: "Q: {{ q }}", engine: "jinja" }, probe)).not.toThrow();
  });
  test("names the unknown placeholder and the known variables", () => {
    let error: AglError | undefined;
    try {
      checkSeedTemplate("p", { template: "Q: {question}", engine: "f-string" }, probe);
    } catch (e) {
      error = e as AglError;
    }
    expect(error).toBeInstanceOf(AglError);
    expect(error?.code).toBe("unknown_placeholder");
    expect(error?.message).toContain("'question'");
    expect(error?.message).toContain('prompt template "p"');
    expect(error?.message).toContain("Known variables: q, n");
    expect(() => checkSeedTemplate("j", { template: "{{ nope }}", engine: "jinja" }, probe)).toThrow(/nope/);
  });
});

describe("editDefect", () => {
  const probe = probeVariables(tasks);
  const parent = { template: "Q: {q} n={n}", engine: "f-string" as const };
  test("a good edit passes", () => {
    expect(editDefect({ template: "Answer well. Q: {q}, n={n}", engine: "f-string" }, parent, probe)).toBeUndefined();
  });
  test("unknown, dropped, broken or empty", () => {
    expect(editDefect({ template: "Q: {q} {n} {rooms}", engine: "f-string" }, parent, probe)).toMatch(/rooms/);
    expect(editDefect({ template: "Q: {q}", engine: "f-string" }, parent, probe)).toBe("the edit drops placeholder {n}");
    expect(editDefect({ template: "Q: {q {n}", engine: "f-string" }, parent, probe)).toMatch(/cannot render/);
    expect(editDefect({ template: "  ", engine: "f-string" }, parent, probe)).toBe("the edit is empty");
  });
  test("usedVariables finds what a template needs", () => {
    expect(usedVariables(parent, probe)).toEqual(["q", "n"]);
    expect(usedVariables({ template: "{% if q %}{{ q }}{% endif %}", engine: "jinja" }, probe)).toEqual(["q"]);
  });
});
