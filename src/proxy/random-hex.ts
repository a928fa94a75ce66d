import { randomFillSync } from "node:crypto";

// Random bytes are drawn 4 KiB at a time: one call into the system's generator per 170 calls of the proxy, where
// `randomBytes()` per id made two per call.
const pool = Buffer.alloc(4096);
let offset = pool.length;

/** `bytes` cryptographically random bytes, as lowercase hex. */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  offset += bytes;
  return pool.toString("hex", offset - bytes, offset);
}
