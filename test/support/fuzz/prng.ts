/** A seeded pseudo-random generator for fuzzing: the same seed replays the same cases. */
import { randomInt } from "node:crypto";

export interface Prng {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  /** An integer in [min, max] (inclusive). */
  int(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  bytes(n: number): Uint8Array;
}

/** sfc32, seeded through splitmix32: fast, well distributed, 32-bit state words. */
export function createPrng(seed: number): Prng {
  let s = seed >>> 0;
  const splitmix = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix();
  let b = splitmix();
  let c = splitmix();
  let d = splitmix();
  const u32 = () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) u32();
  const next = () => u32() / 4294967296;
  return {
    seed: seed >>> 0,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)] as (typeof items)[number],
    bytes(n) {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = u32() & 0xff;
      return out;
    },
  };
}

/** The seed of this run: `AGL_FUZZ_SEED` when set (to replay a failure), else a random one. */
export function fuzzSeed(): number {
  const fromEnv = process.env.AGL_FUZZ_SEED;
  if (fromEnv !== undefined && fromEnv !== "") {
    const seed = Number(fromEnv);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
      throw new Error(`AGL_FUZZ_SEED must be a 32-bit unsigned integer, got ${fromEnv}`);
    return seed;
  }
  return randomInt(0, 0xffffffff);
}
