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

// Rollout ids count up from a random start. Consecutive rollouts then sit side by side in every index keyed by
// rollout id (rollouts, attempts, spans, queue, counters), so a commit writes a few shared B-tree pages instead of one
// page per index per rollout: with random ids that cost the SQLite store 15 % of its CPU a rollout. Ids of one process
// never repeat (48 random bits repeat after ~2 × 10^7 ids on average); two processes that mint n ids each overlap with
// a probability of about 2n / 2^48 (10^-6 for 10^8 each).
let nextRolloutNumber = Number.parseInt(randomHex(6), 16);

/** `ro-` + 12 hex characters. */
export function newRolloutId(): string {
  const id = nextRolloutNumber;
  nextRolloutNumber = (nextRolloutNumber + 1) % 2 ** 48;
  return `ro-${id.toString(16).padStart(12, "0")}`;
}
/** `at-` + 8 hex characters. */
export const newAttemptId = () => `at-${randomHex(4)}`;
/** `rs-` + 12 hex characters. */
export const newResourcesId = () => `rs-${randomHex(6)}`;
