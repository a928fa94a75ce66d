/** The trace tree: sequence-id order, lost parents, several roots, cycles, hierarchy repair. */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { repairHierarchy } from "../../src/adapter/repair-hierarchy.js";
import { AGL_VIRTUAL, GEN_AI_AGENT_NAME } from "../../src/core/semconv.js";
import { buildTraceTree, type TraceNode, VIRTUAL_ROOT_ID, walk } from "../../src/adapter/trace-tree.js";
import { type Span, SpanSchema } from "../../src/gen/agl/v1/types_pb.js";
import { llmSpan, span } from "../support/span-factory.js";

const shape = (node: TraceNode): unknown => [node.id, node.children.map(shape)];

describe("trace tree", () => {
  it("orders children by sequence id whatever the input order", () => {
    const tree = buildTraceTree([
      span({ id: "c2", parent: "root", seq: 3 }),
      span({ id: "c1", parent: "root", seq: 2 }),
      span({ id: "root", seq: 1 }),
      span({ id: "g", parent: "c1", seq: 4 }),
    ]);
    expect(shape(tree.root)).toEqual([
      "root",
      [
        ["c1", [["g", []]]],
        ["c2", []],
      ],
    ]);
    expect(tree.ordered.map((n) => n.id)).toEqual(["root", "c1", "c2", "g"]);
  });

  it("gives lost parents a virtual span covering their children, under a virtual root, in order of appearance", () => {
    const tree = buildTraceTree([
      span({ id: "a", seq: 1, start: 1, end: 2 }),
      span({ id: "x", parent: "ghost-2", seq: 2, start: 5, end: 6 }),
      span({ id: "y", parent: "ghost-1", seq: 3, start: 3, end: 4 }),
      span({ id: "z", parent: "ghost-1", seq: 4, start: 7, end: 9 }),
    ]);
    expect(shape(tree.root)).toEqual([
      VIRTUAL_ROOT_ID,
      [
        ["a", []],
        ["ghost-2", [["x", []]]],
        [
          "ghost-1",
          [
            ["y", []],
            ["z", []],
          ],
        ],
      ],
    ]);
    const ghost = tree.nodes.get("ghost-1") as TraceNode;
    expect(ghost.virtual).toBe(true);
    expect([ghost.span.name, ghost.span.rolloutId, ghost.span.startTime, ghost.span.endTime]).toEqual([
      AGL_VIRTUAL,
      "ro-000000000001",
      3,
      9,
    ]);
    expect([tree.root.span.startTime, tree.root.span.endTime]).toEqual([1, 9]);
    // Plain objects, as `create()` makes a span of the same fields.
    const created = (fields: Omit<Span, "$typeName">) => create(SpanSchema, { ...fields, startTime: undefined, endTime: undefined });
    const { $typeName: _, ...fields } = ghost.span;
    expect(ghost.span).toStrictEqual(Object.assign(created(fields), { startTime: 3, endTime: 9 }));
    expect(created(fields)).toMatchObject({ spanId: "ghost-1", parentId: "", traceId: ghost.span.traceId, sequenceId: 3 });
  });

  it("cuts parent cycles, keeps the last record of a repeated span id, and accepts no spans", () => {
    const tree = buildTraceTree([
      span({ id: "p", parent: "q", seq: 1 }),
      span({ id: "q", parent: "p", seq: 2 }),
      span({ id: "r", seq: 3, name: "old" }),
      span({ id: "r", seq: 4, name: "new" }),
    ]);
    expect([...walk(tree.root)].map((n) => n.id).sort()).toEqual(["p", "q", "r", VIRTUAL_ROOT_ID]);
    expect(tree.nodes.get("r")?.span.name).toBe("new");
    const empty = buildTraceTree([]);
    expect([empty.root.id, empty.root.children]).toEqual([VIRTUAL_ROOT_ID, []]);
    const times = { startTime: undefined, endTime: undefined };
    expect(empty.root.span).toStrictEqual(Object.assign(create(SpanSchema, { spanId: VIRTUAL_ROOT_ID, name: VIRTUAL_ROOT_ID }), times));
  });

  it("survives a very deep trace", () => {
    const spans = Array.from({ length: 50_000 }, (_, i) => span({ id: `s${i}`, parent: i === 0 ? "" : `s${i - 1}`, seq: i + 1 }));
    const tree = buildTraceTree(spans);
    expect([...walk(tree.root)]).toHaveLength(50_000);
  });
});

describe("hierarchy repair", () => {
  const agent = (id: string, name: string, start: number, end: number, parent = "root", seq = 2) =>
    span({ id, parent, seq, start, end, attrs: { [GEN_AI_AGENT_NAME]: name } });

  it("moves an LLM call hung on the root under the tightest agent span enclosing it in time", () => {
    const tree = buildTraceTree([
      span({ id: "root", seq: 1, start: 0, end: 10 }),
      agent("outer", "planner", 1, 9),
      agent("inner", "worker", 2, 5, "outer", 3),
      llmSpan({ id: "call", parent: "root", seq: 4, start: 3, end: 4, prompt: [1], response: [2] }),
      llmSpan({ id: "late", parent: "root", seq: 5, start: 6, end: 7, prompt: [1], response: [2] }),
      llmSpan({ id: "untimed", parent: "root", seq: 6, prompt: [1], response: [2] }),
    ]);
    expect(repairHierarchy(tree)).toBe(2);
    expect(shape(tree.root)).toEqual([
      "root",
      [
        [
          "outer",
          [
            ["inner", [["call", []]]],
            ["late", []],
          ],
        ],
        ["untimed", []],
      ],
    ]);
  });

  it("never moves a call under an agent with the very same interval, nor under its own descendants", () => {
    const tree = buildTraceTree([
      span({ id: "root", seq: 1, start: 0, end: 10 }),
      agent("same", "a", 3, 4),
      llmSpan({ id: "call", parent: "root", seq: 3, start: 3, end: 4, prompt: [1], response: [2] }),
      agent("child", "b", 2, 5, "call", 4),
    ]);
    expect(repairHierarchy(tree)).toBe(0);
  });
});
