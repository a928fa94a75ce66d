/** Mean and spread of a set of numbers. */
export interface Summary {
  n: number;
  mean: number;
  /** Population standard deviation (0 for one value). */
  std: number;
  min: number;
  max: number;
}

/** The summary of the finite values among `values`; undefined when there are none. */
export function summarize(values: Iterable<number | undefined>): Summary | undefined {
  let n = 0;
  let sum = 0;
  let sumSq = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    if (v === undefined || !Number.isFinite(v)) continue;
    n++;
    sum += v;
    sumSq += v * v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (n === 0) return undefined;
  const mean = sum / n;
  return { n, mean, std: Math.sqrt(Math.max(0, sumSq / n - mean * mean)), min, max };
}

/** Summaries of `items` grouped by `key` (undefined keys skipped), in ascending key order. */
export function summarizeBy<T, K extends string | number>(
  items: Iterable<T>,
  key: (item: T) => K | undefined,
  value: (item: T) => number | undefined,
): { key: K; summary: Summary }[] {
  const groups = new Map<K, number[]>();
  for (const item of items) {
    const k = key(item);
    const v = value(item);
    if (k === undefined || v === undefined || !Number.isFinite(v)) continue;
    const list = groups.get(k) ?? [];
    list.push(v);
    groups.set(k, list);
  }
  return [...groups.entries()]
    .sort(([a], [b]) =>
      typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b), undefined, { numeric: true }),
    )
    .flatMap(([k, vs]) => {
      const summary = summarize(vs);
      return summary ? [{ key: k, summary }] : [];
    });
}

/** Counts of events per time bucket: `[bucket start, count]` for every bucket from `from` up to `to` (epoch seconds). */
export function bucketCounts(times: Iterable<number>, from: number, to: number, bucketSeconds: number): [number, number][] {
  if (!(bucketSeconds > 0) || to < from) return [];
  const first = Math.floor(from / bucketSeconds) * bucketSeconds;
  const count = Math.floor((to - first) / bucketSeconds) + 1;
  const counts = new Array<number>(count).fill(0);
  for (const t of times) {
    const i = Math.floor((t - first) / bucketSeconds);
    if (i >= 0 && i < count) counts[i] = (counts[i] ?? 0) + 1;
  }
  return counts.map((c, i) => [first + i * bucketSeconds, c]);
}

/** A bucket width that splits `rangeSeconds` into at most `maxBuckets`, rounded to a readable unit. */
export function niceBucketSeconds(rangeSeconds: number, maxBuckets = 60): number {
  const steps = [1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 21_600, 43_200, 86_400];
  return steps.find((s) => rangeSeconds / s <= maxBuckets) ?? Math.ceil(rangeSeconds / maxBuckets / 86_400) * 86_400;
}

/**
 * Rates from successive samples of a growing counter (e.g. finished rollouts): `[time, per second]` between each pair
 * of samples. A counter that drops (a store restart) yields no rate for that interval.
 */
export function ratesFromSamples(samples: readonly { time: number; value: number }[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1] as { time: number; value: number };
    const b = samples[i] as { time: number; value: number };
    const dt = b.time - a.time;
    if (dt > 0 && b.value >= a.value) out.push([b.time, (b.value - a.value) / dt]);
  }
  return out;
}
