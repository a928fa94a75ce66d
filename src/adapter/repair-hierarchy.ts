import { agentNameOf, defaultRecognizers, type LlmCallRecognizer, recognizeLlmCall } from "./recognizers.js";
import type { TraceNode, TraceTree } from "./trace-tree.js";

/**
 * Mixed instrumentation often hangs an LLM call on the session root instead of on the agent span that was active
 * when it ran. This moves every such call under the tightest agent span that (a) lies inside the call's current
 * parent's subtree, (b) is not the call itself or below it, and (c) contains the call's time interval with some
 * slack. Calls and agents without both times stay put. All decisions are taken on the tree as given, so the result
 * does not depend on the order of moves. Returns how many calls moved.
 */
export function repairHierarchy(tree: TraceTree, recognizers: readonly LlmCallRecognizer[] = defaultRecognizers): number {
  // Euler-tour numbering: x is below p iff enter[p] < enter[x] <= exit[p].
  const enter = new Map<TraceNode, number>();
  const exit = new Map<TraceNode, number>();
  const agents: TraceNode[] = [];
  const calls: TraceNode[] = [];
  let clock = 0;
  const stack: [TraceNode, boolean][] = [[tree.root, false]];
  while (stack.length > 0) {
    const [node, done] = stack.pop() as [TraceNode, boolean];
    if (done) {
      exit.set(node, clock);
      continue;
    }
    enter.set(node, ++clock);
    if (!node.virtual && hasTimes(node)) {
      if (agentNameOf(node.span) !== undefined) agents.push(node);
      else if (recognizeLlmCall(node.span, recognizers) && !(node.parent && isCallNode(node.parent, recognizers))) calls.push(node);
    }
    stack.push([node, true]);
    for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i] as TraceNode, false]);
  }
  if (agents.length === 0 || calls.length === 0) return 0;

  const moves: [TraceNode, TraceNode][] = [];
  for (const call of calls) {
    const parent = call.parent;
    if (!parent) continue;
    const lo = enter.get(parent) as number;
    const hi = exit.get(parent) as number;
    const callIn = enter.get(call) as number;
    const callOut = exit.get(call) as number;
    const start = call.span.startTime as number;
    const end = call.span.endTime as number;
    let best: TraceNode | undefined;
    let bestSlack = Number.POSITIVE_INFINITY;
    for (const agent of agents) {
      const at = enter.get(agent) as number;
      if (at <= lo || at > hi || (at >= callIn && at <= callOut)) continue;
      const aStart = agent.span.startTime as number;
      const aEnd = agent.span.endTime as number;
      if (aStart > start || aEnd < end) continue;
      const slack = aEnd - end + (start - aStart);
      if (slack > 0 && slack < bestSlack) {
        best = agent;
        bestSlack = slack;
      }
    }
    if (best && best !== parent) moves.push([call, best]);
  }
  for (const [call, to] of moves) {
    const from = call.parent as TraceNode;
    from.children.splice(from.children.indexOf(call), 1);
    call.parent = to;
    insertBySequence(to.children, call);
  }
  return moves.length;
}

const hasTimes = (node: TraceNode) => node.span.startTime !== undefined && node.span.endTime !== undefined;

function isCallNode(node: TraceNode, recognizers: readonly LlmCallRecognizer[]): boolean {
  return !node.virtual && recognizeLlmCall(node.span, recognizers) !== undefined;
}

function insertBySequence(children: TraceNode[], node: TraceNode): void {
  let i = children.length;
  while (i > 0 && (children[i - 1] as TraceNode).span.sequenceId > node.span.sequenceId) i--;
  children.splice(i, 0, node);
}
