/** What the waterfall needs of a span (the generated `Span` has these fields). */
export interface WaterfallSpan {
  spanId: string;
  parentId: string;
  name: string;
  sequenceId: number;
  startTime?: number | undefined;
  endTime?: number | undefined;
}

/** One row of the waterfall: a span placed by depth and by time, in fractions of the whole trace's time range. */
export interface WaterfallRow<S extends WaterfallSpan = WaterfallSpan> {
  span: S;
  depth: number;
  /** Where the bar starts, 0–1 of the range. */
  offset: number;
  /** The bar's width, 0–1 of the range (0 for an instant or an unfinished span without end). */
  width: number;
  /** Seconds; undefined when the span has no start or end. */
  duration: number | undefined;
  /** The span's parent id names no span of this set (the parent was never stored, or is another attempt's). */
  orphan: boolean;
  childCount: number;
}

export interface WaterfallLayout<S extends WaterfallSpan = WaterfallSpan> {
  rows: WaterfallRow<S>[];
  /** Epoch seconds of the earliest start and the latest end (or start). */
  start: number;
  end: number;
}

/**
 * Lays a span tree out as a waterfall: depth-first from the roots, siblings by start time (then sequence id, the
 * store's per-rollout order), so a child is always under its parent. Spans whose parent is missing become roots
 * (marked orphan); a parent cycle (corrupt input) cannot loop, because every span is placed once.
 */
export function layoutWaterfall<S extends WaterfallSpan>(spans: readonly S[]): WaterfallLayout<S> {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const children = new Map<string, S[]>();
  const roots: S[] = [];
  for (const span of spans) {
    if (span.parentId !== "" && byId.has(span.parentId) && span.parentId !== span.spanId) {
      const list = children.get(span.parentId) ?? [];
      list.push(span);
      children.set(span.parentId, list);
    } else roots.push(span);
  }
  const times = spans.flatMap((s) => [s.startTime, s.endTime]).filter((t): t is number => t !== undefined && t > 0);
  const start = times.length > 0 ? Math.min(...times) : 0;
  const end = times.length > 0 ? Math.max(...times) : 0;
  const range = end - start;
  const fraction = (t: number) => (range > 0 ? (t - start) / range : 0);

  const rows: WaterfallRow<S>[] = [];
  const placed = new Set<string>();
  const visit = (span: S, depth: number) => {
    if (placed.has(span.spanId)) return;
    placed.add(span.spanId);
    const kids = (children.get(span.spanId) ?? []).sort(bySiblingOrder);
    const hasStart = span.startTime !== undefined && span.startTime > 0;
    const hasEnd = span.endTime !== undefined && span.endTime > 0;
    const offset = hasStart ? fraction(span.startTime as number) : 0;
    rows.push({
      span,
      depth,
      offset,
      width: hasStart && hasEnd ? Math.max(0, fraction(span.endTime as number) - offset) : 0,
      duration: hasStart && hasEnd ? Math.max(0, (span.endTime as number) - (span.startTime as number)) : undefined,
      orphan: span.parentId !== "" && !byId.has(span.parentId),
      childCount: kids.length,
    });
    for (const kid of kids) visit(kid, depth + 1);
  };
  for (const root of roots.sort(bySiblingOrder)) visit(root, 0);
  // Spans only reachable through a cycle: shown at the top level rather than lost.
  for (const span of [...spans].sort(bySiblingOrder)) visit(span, 0);
  return { rows, start, end };
}

function bySiblingOrder(a: WaterfallSpan, b: WaterfallSpan): number {
  return (a.startTime ?? Number.POSITIVE_INFINITY) - (b.startTime ?? Number.POSITIVE_INFINITY) || a.sequenceId - b.sequenceId;
}
