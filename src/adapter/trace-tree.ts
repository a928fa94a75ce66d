import type { Span } from "../gen/agl/v1/types_pb.js";
import { AGL_VIRTUAL } from "../core/semconv.js";

/** A span in a trace tree, with its children ordered by sequence id. */
export interface TraceNode {
  readonly id: string;
  readonly span: Span;
  parent: TraceNode | undefined;
  children: TraceNode[];
  /** Synthetic: a lost parent (referenced, never recorded) or the virtual root. */
  readonly virtual: boolean;
}

/** The spans of one attempt as a tree. */
export interface TraceTree {
  /** The single root span, or a virtual root over several roots (and over lost parents). */
  readonly root: TraceNode;
  /** Every node by span id, virtual ones included. */
  readonly nodes: ReadonlyMap<string, TraceNode>;
  /** The recorded spans' nodes in sequence-id order. */
  readonly ordered: readonly TraceNode[];
}

/** Id of the synthetic root placed over several roots. */
export const VIRTUAL_ROOT_ID = "virtual-root";

/**
 * Builds the tree of `spans` (one attempt's). Order comes from sequence ids only — never from clocks — with input
 * order breaking ties. A parent that is referenced but was never recorded becomes a virtual node (name
 * `agentlightning.virtual`) under the root, placed where its first child appears; a span in a parent cycle is cut
 * loose and attached to the root. Several roots get a virtual root. A span id seen twice keeps its last record.
 */
export function buildTraceTree(spans: readonly Span[]): TraceTree {
  const sorted = spans.map((span, i) => ({ span, i }));
  sorted.sort((a, b) => a.span.sequenceId - b.span.sequenceId || a.i - b.i);

  const nodes = new Map<string, TraceNode>();
  for (const { span } of sorted) {
    nodes.set(span.spanId, { id: span.spanId, span, parent: undefined, children: [], virtual: false });
  }
  const ordered: TraceNode[] = [];
  const roots: TraceNode[] = [];
  for (const { span } of sorted) {
    const node = nodes.get(span.spanId) as TraceNode;
    if (node.span !== span) continue; // an earlier record of a repeated id
    ordered.push(node);
    if (!span.parentId || span.parentId === span.spanId) {
      roots.push(node);
      continue;
    }
    let parent = nodes.get(span.parentId);
    if (!parent) {
      parent = { id: span.parentId, span: virtualSpan(span, span.parentId, AGL_VIRTUAL), parent: undefined, children: [], virtual: true };
      nodes.set(parent.id, parent);
      roots.push(parent);
    }
    node.parent = parent;
    parent.children.push(node);
  }
  cutCycles(ordered, roots);
  for (const node of roots) if (node.virtual) spanTimesFromChildren(node);

  let root: TraceNode;
  if (roots.length === 1) {
    root = roots[0] as TraceNode;
  } else {
    const span = virtualSpan(roots[0]?.span, VIRTUAL_ROOT_ID, VIRTUAL_ROOT_ID);
    root = { id: VIRTUAL_ROOT_ID, span, parent: undefined, children: roots, virtual: true };
    for (const child of roots) child.parent = root;
    spanTimesFromChildren(root);
    nodes.set(VIRTUAL_ROOT_ID, root);
  }
  return { root, nodes, ordered };
}

/** Nodes unreachable from the roots sit on a parent cycle: each is detached from its parent and made a root. */
function cutCycles(ordered: readonly TraceNode[], roots: TraceNode[]): void {
  const seen = new Set<TraceNode>();
  const mark = (from: TraceNode) => {
    const stack = [from];
    while (stack.length > 0) {
      const node = stack.pop() as TraceNode;
      if (seen.has(node)) continue;
      seen.add(node);
      for (const child of node.children) stack.push(child);
    }
  };
  for (const root of roots) mark(root);
  for (const node of ordered) {
    if (seen.has(node)) continue;
    const siblings = node.parent?.children;
    if (siblings) siblings.splice(siblings.indexOf(node), 1);
    node.parent = undefined;
    roots.push(node);
    mark(node);
  }
}

/** A span of the tree's own, placed as `model`'s (none: an empty trace's root); a plain message as `create()` makes it. */
function virtualSpan(model: Span | undefined, spanId: string, name: string): Span {
  return {
    $typeName: "agl.v1.Span",
    rolloutId: model?.rolloutId ?? "",
    attemptId: model?.attemptId ?? "",
    sequenceId: model?.sequenceId ?? 0,
    traceId: model?.traceId ?? "",
    spanId,
    parentId: "",
    name,
    attributes: {},
    events: [],
    links: [],
  };
}

/** A virtual span covers its children: earliest start to latest end. */
function spanTimesFromChildren(node: TraceNode): void {
  let start: number | undefined;
  let end: number | undefined;
  for (const { span } of node.children) {
    if (span.startTime !== undefined && (start === undefined || span.startTime < start)) start = span.startTime;
    if (span.endTime !== undefined && (end === undefined || span.endTime > end)) end = span.endTime;
  }
  node.span.startTime = start;
  node.span.endTime = end;
}

/** Pre-order walk of `from`'s subtree (itself included), iterative so deep traces cannot overflow the stack. */
export function* walk(from: TraceNode): Generator<TraceNode> {
  const stack = [from];
  while (stack.length > 0) {
    const node = stack.pop() as TraceNode;
    yield node;
    for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i] as TraceNode);
  }
}

/** Whether `node` lies strictly below `ancestor`. */
export function isDescendant(node: TraceNode, ancestor: TraceNode): boolean {
  for (let p = node.parent; p; p = p.parent) if (p === ancestor) return true;
  return false;
}
