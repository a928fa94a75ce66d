import { randomFillSync } from "node:crypto";

// Random bytes are drawn 4 KiB at a time: one call into the system's generator per hundreds of ids (the store mints
// a rollout and an attempt id per rollout, the proxy a span id and often a trace id per call), where `randomBytes()`
// made one per id.
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

/** `ro-` + 12 hex characters. */
export const newRolloutId = () => `ro-${randomHex(6)}`;
/** `at-` + 8 hex characters. */
export const newAttemptId = () => `at-${randomHex(4)}`;
/** `rs-` + 12 hex characters. */
export const newResourcesId = () => `rs-${randomHex(6)}`;
