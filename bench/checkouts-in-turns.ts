/**
 * Comparing checkouts on the shared machine, whose speed drifts between runs: each run in a fresh process, the
 * checkouts in ABBA order round after round, and each one's figure summed up at the end.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { mean, median } from "./stats.js";

/**
 * Runs `script` (a bench's own file, given its `import.meta.url`) again in a new process with `args`, and returns the
 * JSON it prints last: the result of one run for one checkout.
 */
export function runInChild<R>(script: string, args: string[], cwd: string): R {
  const output = execFileSync(process.execPath, ["--import", "tsx", fileURLToPath(script), ...args], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  return JSON.parse(output.trim().split("\n").at(-1) as string) as R;
}

/**
 * Runs `run` for each of `roots` in ABBA order (A B B A, then B A A B) `rounds` times, and returns each root's
 * `figure` in run order: the order evens out the drift and what a run inherits from the one before it.
 */
export function inTurns<R>(
  roots: readonly string[],
  rounds: number,
  run: (root: string) => R,
  figure: (result: R) => number,
): Map<string, number[]> {
  const figures = new Map<string, number[]>(roots.map((root) => [root, []]));
  for (let round = 0; round < rounds; round++) {
    for (const root of round % 2 === 0 ? [...roots, ...roots.toReversed()] : [...roots.toReversed(), ...roots]) {
      figures.get(root)?.push(figure(run(root)));
    }
  }
  return figures;
}

/** Prints each root's range, mean and median of `figures`, as `label` in `unit` with `digits` decimals. */
export function printSummary(figures: Map<string, number[]>, label: string, unit: string, digits: number): void {
  for (const [root, xs] of figures) {
    console.log(
      `${root}: ${label} ${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)} ${unit}, ` +
        `mean ${mean(xs).toFixed(digits)}, median ${median(xs).toFixed(digits)}`,
    );
  }
}
