import { describe, expect, it } from "vitest";
import { mapAsyncIterable } from "./mapped-iterable.js";

/** An async generator over `values` that records how it ended; throws `error` after them when given. */
function source(values: number[], error?: Error) {
  const log: string[] = [];
  async function* generate() {
    try {
      for (const value of values) yield value;
      if (error) throw error;
    } finally {
      log.push("closed");
    }
  }
  return { iterable: generate(), log };
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const value of iterable) out.push(value);
  return out;
}

describe("mapAsyncIterable", () => {
  it("maps every value, in order, and ends with its source", async () => {
    const s = source([1, 2, 3]);
    expect(await collect(mapAsyncIterable(s.iterable, (v) => v * 10))).toEqual([10, 20, 30]);
    expect(s.log).toEqual(["closed"]);
  });

  it("passes the source's error through `fail`, and stays ended after it", async () => {
    const s = source([1], new Error("broke"));
    const mapped = mapAsyncIterable(
      s.iterable,
      (v) => v,
      (error) => new Error(`mapped: ${(error as Error).message}`),
    );
    const iterator = mapped[Symbol.asyncIterator]();
    expect(await iterator.next()).toEqual({ done: false, value: 1 });
    await expect(iterator.next()).rejects.toThrow("mapped: broke");
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it("closes the source when `map` throws, and throws what `fail` makes of it", async () => {
    const s = source([1, 2, 3]);
    const mapped = mapAsyncIterable(
      s.iterable,
      (v) => {
        if (v === 2) throw new Error("bad value");
        return v;
      },
      (error) => new Error(`failed: ${(error as Error).message}`),
    );
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const v of mapped) seen.push(v);
      })(),
    ).rejects.toThrow("failed: bad value");
    expect(seen).toEqual([1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(s.log).toEqual(["closed"]);
  });

  it("passes a consumer's early return on to the source", async () => {
    const s = source([1, 2, 3]);
    for await (const v of mapAsyncIterable(s.iterable, (x) => x)) if (v === 1) break;
    expect(s.log).toEqual(["closed"]);
  });
});
