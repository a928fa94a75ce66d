import { describe, expect, test } from "vitest";
import { createBatchIterator, createRng } from "./rng.js";

describe("createRng", () => {
  test("the same seed gives the same sequence; another seed another one", () => {
    const draw = (seed: number) => Array.from({ length: 5 }, createRng(seed).next.bind(null));
    const a = createRng(7);
    const b = createRng(7);
    expect(Array.from({ length: 20 }, () => a.next())).toEqual(Array.from({ length: 20 }, () => b.next()));
    expect(draw(1)).not.toEqual(draw(2));
  });

  test("int stays in range and shuffle is a permutation", () => {
    const rng = createRng(3);
    for (let i = 0; i < 1000; i++) expect(rng.int(4)).toBeLessThan(4);
    expect(rng.shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5]);
  });
});

describe("createBatchIterator", () => {
  test("an epoch visits every item once before any repeats", () => {
    const next = createBatchIterator(10, 5, createRng(1));
    const epoch = [...next(), ...next()];
    expect(new Set(epoch).size).toBe(10);
  });

  test("a batch never repeats an item, even across an epoch boundary", () => {
    const next = createBatchIterator(5, 3, createRng(9));
    for (let i = 0; i < 50; i++) {
      const batch = next();
      expect(new Set(batch).size).toBe(3);
    }
  });

  test("a batch as large as the dataset is the whole dataset", () => {
    const next = createBatchIterator(4, 10, createRng(2));
    expect(next().sort()).toEqual([0, 1, 2, 3]);
  });
});
