// Token ids are small non-negative integers that recur from call to call: their bigints are made once and shared
// (bigints are immutable), which spares the garbage collector hundreds of new objects per recorded call and a
// `BigInt()` per id. The table grows to the largest id seen, up to a vocabulary of 2^18.
const limit = 1 << 18;
const shared: bigint[] = [];

/** `BigInt(value)`, shared for small non-negative integers. */
export function smallBigInt(value: number | bigint): bigint {
  if (typeof value !== "number" || !(value >= 0 && value < limit) || !Number.isInteger(value)) return BigInt(value);
  for (let i = shared.length; i <= value; i++) shared.push(BigInt(i));
  return shared[value] as bigint;
}
