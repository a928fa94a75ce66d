import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * The import graph of the modules under `src/`, as the TypeScript compiler resolves it (type-only and dynamic imports
 * included): `tsc --explainFiles` says, for every file of the program, which files import it. Keys and values are
 * paths relative to `src/`.
 */
export async function importGraph(repo: string): Promise<Map<string, string[]>> {
  const tsc = join(repo, "node_modules", "typescript", "bin", "tsc");
  const { stdout } = await promisify(execFile)(process.execPath, [tsc, "-p", "tsconfig.build.json", "--noEmit", "--explainFiles"], {
    cwd: repo,
    maxBuffer: 256 << 20,
  });
  const graph = new Map<string, string[]>();
  const inSrc = (path: string) => (path.startsWith("src/") ? path.slice(4) : undefined);
  let current: string | undefined;
  for (const line of stdout.split("\n")) {
    if (!line.startsWith(" ")) {
      current = inSrc(line.trim());
      if (current !== undefined && !graph.has(current)) graph.set(current, []);
      continue;
    }
    const importer = inSrc(/^\s+Imported via .* from file '([^']+)'/.exec(line)?.[1] ?? "");
    if (current === undefined || importer === undefined) continue;
    const edges = graph.get(importer) ?? graph.set(importer, []).get(importer)!;
    edges.push(current);
  }
  return graph;
}

/** The graph's cycles: each strongly connected component of more than one node (or a node importing itself). */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    if (component.length > 1 || graph.get(node)?.includes(node)) cycles.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return cycles;
}

/** The graph between parts: `src/<part>/…` files collapse into `<part>`; top-level entry files are left out. */
export function partGraph(graph: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const partOf = (file: string) => (file.includes("/") ? file.split("/")[0]! : undefined);
  const parts = new Map<string, Set<string>>();
  for (const [file, imports] of graph) {
    const from = partOf(file);
    if (from === undefined) continue;
    const edges = parts.get(from) ?? parts.set(from, new Set()).get(from)!;
    for (const target of imports) {
      const to = partOf(target);
      if (to !== undefined && to !== from) edges.add(to);
    }
  }
  return new Map([...parts].map(([part, edges]) => [part, [...edges]]));
}
