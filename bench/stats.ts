import { readFileSync } from "node:fs";

/** User + system CPU seconds of a `/proc/…/stat` line, a process's or a thread's (Linux). */
export function statCpuSeconds(stat: string): number {
  // The fields after the command name, which is in parentheses and may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** User + system CPU seconds a live process has used so far (Linux /proc); throws once it is gone. */
export const processCpuSeconds = (pid: number): number => statCpuSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"));

/** The mean of `xs`; NaN for none. */
export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The median of `xs` (the mean of the two middle values for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : ((s[(s.length - 1) >> 1] as number) + (s[s.length >> 1] as number)) / 2;
}

/** The `p`th percentile (0–100) of `sorted`, ascending: the value at rank ⌊p/100 · n⌋ (100: the largest); NaN for none. */
export const percentile = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
