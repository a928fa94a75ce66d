import { randomBytes } from "node:crypto";

const hex = (chars: number) => randomBytes(Math.ceil(chars / 2)).toString("hex").slice(0, chars);

/** `ro-` + 12 hex characters. */
export const newRolloutId = () => `ro-${hex(12)}`;
/** `at-` + 8 hex characters. */
export const newAttemptId = () => `at-${hex(8)}`;
/** `rs-` + 12 hex characters. */
export const newResourcesId = () => `rs-${hex(12)}`;
/** A fresh group id for rollouts sampled from one task. */
export const newGroupId = () => `gr-${hex(12)}`;
