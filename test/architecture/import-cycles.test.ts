import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { cyclesOf, importGraph, partGraph } from "./import-graph.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));
let graph: Map<string, string[]>;

beforeAll(async () => {
  graph = await importGraph(repo);
}, 120_000);

describe("the import graph of src/", () => {
  it("is read from the compiler (every entry point and part is in it)", () => {
    for (const file of ["index.ts", "store.ts", "core/errors.ts", "store/store.ts", "runner/runner.ts", "proxy/llm-proxy.ts"]) {
      expect(graph.has(file), file).toBe(true);
    }
    expect(graph.get("index.ts")?.length).toBeGreaterThan(5);
  });

  it("has no cycle between files", () => {
    expect(cyclesOf(graph)).toEqual([]);
  });

  it("has no cycle between parts (src/<part>/)", () => {
    expect(cyclesOf(partGraph(graph))).toEqual([]);
  });

  it("keeps src/core/ at the bottom: it imports only itself and generated code", () => {
    const outward = [...graph]
      .filter(([file]) => file.startsWith("core/"))
      .flatMap(([file, imports]) =>
        imports.filter((to) => !to.startsWith("core/") && !to.startsWith("gen/")).map((to) => `${file} -> ${to}`),
      );
    expect(outward).toEqual([]);
  });
});

describe("the cycle finder", () => {
  it("finds a cycle and leaves a chain alone", () => {
    const chain = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", []],
    ]);
    expect(cyclesOf(chain)).toEqual([]);
    const loop = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["d"]],
    ]);
    expect(cyclesOf(loop)).toEqual([["a", "b", "c"], ["d"]]);
  });

  it("collapses files into parts", () => {
    const files = new Map([
      ["agent/x.ts", ["emitter/y.ts", "index.ts"]],
      ["emitter/y.ts", ["agent/z.ts"]],
      ["agent/z.ts", []],
      ["index.ts", []],
    ]);
    expect(cyclesOf(partGraph(files))).toEqual([["agent", "emitter"]]);
  });
});
