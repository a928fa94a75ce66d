/**
 * Word problems for the word-math agent, drawn from a seeded generator: the same splits on every machine. Each split
 * is its own stream (its own seed), and a problem whose question appears in an earlier split is redrawn, so the test
 * split never shares a question with what is trained on. `npx tsx examples/word-math/tasks.ts OUT_DIR` writes
 * train.jsonl, val.jsonl and test.jsonl there.
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
  const name = NAMES[int(0, NAMES.length - 1)]!;
  const item = ITEMS[int(0, ITEMS.length - 1)]!;
  switch (int(0, 3)) {
    case 0: {
      const [a, b] = [int(11, 89), int(11, 89)];
      return { question: `${name} has ${a} ${item}s and gets ${b} more. How many ${item}s does ${name} have now?`, answer: a + b };
    }
    case 1: {
      const [a, b] = [int(40, 99), int(11, 39)];
      return { question: `${name} had ${a} ${item}s and gave ${b} away. How many ${item}s are left?`, answer: a - b };
    }
    case 2: {
      const [a, b] = [int(3, 9), int(4, 12)];
      return { question: `${name} buys ${a} bags with ${b} ${item}s in each. How many ${item}s is that?`, answer: a * b };
    }
    default: {
      const [k, b] = [int(3, 12), int(2, 9)];
      return {
        question: `${name} shares ${k * b} ${item}s equally among ${b} friends. How many ${item}s does each friend get?`,
        answer: k,
      };
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
