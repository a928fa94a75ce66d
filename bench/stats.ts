/** The median of `xs` (the mean of the two middle values for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : ((s[(s.length - 1) >> 1] as number) + (s[s.length >> 1] as number)) / 2;
}
