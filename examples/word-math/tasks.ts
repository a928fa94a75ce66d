/**
 * Two-step word problems for the word-math agent, drawn from a seeded generator: the same splits on every machine.
 * Each problem takes two or three operations (a calculation such as `35 + 4 * 7` or `(23 + 13) / 4`), some are worded
 * with their numbers in another order than the calculation's, and half name a number the calculation must leave out
 * (an age, a day), so the model has to read the question, not copy a pattern. Each
 * split is its own stream (its own seed), and a problem whose question appears in an earlier split is redrawn, so
 * the test split never shares a question with what is trained on. `npx tsx examples/word-math/tasks.ts OUT_DIR`
 * writes train.jsonl, val.jsonl and test.jsonl there.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A problem and the number that answers it. */
export interface WordMathTask {
  question: string;
  answer: number;
}

/** How many problems each split has. */
export const SPLITS = { train: 512, val: 64, test: 128 } as const;
const SEEDS = { train: 11, val: 23, test: 37 } as const;

const NAMES = ["Ann", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kim", "Leo"];
const ITEMS = ["apple", "book", "coin", "pencil", "marble", "card", "sticker", "shell", "stamp", "cookie"];

/** mulberry32: a tiny seeded generator, the same sequence everywhere. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function draw(next: () => number): WordMathTask {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(options: readonly T[]): T => options[int(0, options.length - 1)]!;
  const n = pick(NAMES);
  const item = pick(ITEMS);
  // A number the calculation must leave out, in front of half of the problems.
  const lead = pick([n, n, `${n} is ${int(7, 15)} years old. ${n}`, `On day ${int(2, 30)} of the month, ${n}`]);
  const task = (question: string, answer: number): WordMathTask => ({ question, answer });
  // Seven kinds of problem, some in two wordings: the second gives the numbers in another order than the calculation.
  switch (int(0, 6)) {
    case 0: {
      const [a, b, c] = [int(11, 89), int(3, 9), int(4, 12)];
      return pick([
        task(`${lead} has ${a} ${item}s and buys ${b} bags with ${c} ${item}s in each. How many ${item}s does ${n} have now?`, a + b * c),
        task(`${lead} buys ${b} bags of ${c} ${item}s. ${n} already had ${a} ${item}s. How many ${item}s does ${n} have now?`, a + b * c),
      ]);
    }
    case 1: {
      const [b, c] = [int(3, 9), int(2, 6)];
      const a = b * c + int(5, 60);
      return pick([
        task(`${lead} had ${a} ${item}s and gave ${b} friends ${c} ${item}s each. How many ${item}s are left?`, a - b * c),
        task(`${lead} gives ${c} ${item}s to each of ${b} friends from a pile of ${a}. How many ${item}s are left?`, a - b * c),
      ]);
    }
    case 2: {
      const [a, b] = [int(11, 89), int(11, 59)];
      const c = int(5, a + b - 5);
      return pick([
        task(`${lead} has ${a} ${item}s, gets ${b} more and then gives ${c} away. How many ${item}s does ${n} have now?`, a + b - c),
        task(
          `${lead} gives ${c} ${item}s away after getting ${b} more. ${n} started with ${a}. How many ${item}s does ${n} have now?`,
          a + b - c,
        ),
      ]);
    }
    case 3: {
      const [b, c] = [int(3, 9), int(4, 12)];
      const a = int(2, b * c - 2);
      return pick([
        task(`${lead} buys ${b} bags with ${c} ${item}s in each and loses ${a} of them. How many ${item}s are left?`, b * c - a),
        task(`${lead} loses ${a} of the ${item}s from ${b} full bags of ${c}. How many ${item}s are left?`, b * c - a),
      ]);
    }
    case 4: {
      const [k, c] = [int(3, 12), int(2, 9)];
      const a = int(5, k * c - 5);
      return pick([
        task(
          `${lead} has ${a} ${item}s and gets ${k * c - a} more, then shares them equally among ${c} friends. How many ${item}s does each friend get?`,
          k,
        ),
        task(`${lead} shares ${a} ${item}s and ${k * c - a} more equally among ${c} friends. How many ${item}s does each friend get?`, k),
      ]);
    }
    case 5: {
      const [a, b, c, d] = [int(2, 9), int(3, 12), int(2, 9), int(3, 12)];
      return task(
        `${lead} buys ${a} bags with ${b} ${item}s in each and ${c} boxes with ${d} ${item}s in each. How many ${item}s is that?`,
        a * b + c * d,
      );
    }
    default: {
      const [k, c] = [int(3, 12), int(2, 9)];
      const b = int(3, 30);
      return task(
        `${lead} had ${k * c + b} ${item}s, lost ${b} and shared the rest equally among ${c} friends. How many ${item}s does each friend get?`,
        k,
      );
    }
  }
}

/** The three splits: disjoint by question, each the same on every run. */
export function splits(): Record<keyof typeof SPLITS, WordMathTask[]> {
  const seen = new Set<string>();
  const out = {} as Record<keyof typeof SPLITS, WordMathTask[]>;
  for (const split of ["test", "val", "train"] as const) {
    const next = random(SEEDS[split]);
    const tasks: WordMathTask[] = [];
    while (tasks.length < SPLITS[split]) {
      const task = draw(next);
      if (seen.has(task.question)) continue;
      seen.add(task.question);
      tasks.push(task);
    }
    out[split] = tasks;
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2] ?? ".";
  mkdirSync(dir, { recursive: true });
  for (const [split, tasks] of Object.entries(splits())) {
    writeFileSync(join(dir, `${split}.jsonl`), `${tasks.map((t) => JSON.stringify(t)).join("\n")}\n`);
  }
}
