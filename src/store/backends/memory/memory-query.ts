import type { PageResult, PageSpec, StringMatch } from "../../backend.js";
import { deepCopy } from "../../deep-copy.js";

/** The value of a sortable field: a string, a number, or undefined for an unset time (sorts as +infinity). */
export type SortValue = string | number | undefined;

/** Conditions combined with AND, or with OR when `any`; no conditions match everything. */
export function combine(conditions: boolean[], any: boolean): boolean {
  if (conditions.length === 0) return true;
  return any ? conditions.some(Boolean) : conditions.every(Boolean);
}

export function matchString(value: string, match: StringMatch | undefined, out: boolean[]): void {
  if (!match) return;
  if (match.exact !== undefined) out.push(value === match.exact);
  if (match.contains !== undefined) out.push(value.includes(match.contains));
}

function compare(a: SortValue, b: SortValue): number {
  if (a === b) return 0;
  if (a === undefined) return 1;
  if (b === undefined) return -1;
  return a < b ? -1 : 1;
}

/**
 * Sorts (stably, so ties keep insertion order in both directions) and paginates matches given in insertion order.
 * Items are copied on the way out (deep copies by default) so callers never alias mutable stored objects.
 */
export function sortAndPage<T>(
  matches: T[],
  page: PageSpec,
  sortValue: (item: T, field: string) => SortValue,
  defaultSort?: string,
  copy: (item: T) => T = deepCopy,
): PageResult<T> {
  const field = page.sortBy ?? defaultSort;
  let items = matches;
  if (field === undefined && page.descending) items = [...matches].reverse();
  else if (field !== undefined) {
    const sign = page.descending ? -1 : 1;
    const keyed = matches.map((item) => ({ item, key: sortValue(item, field) }));
    keyed.sort((x, y) => sign * compare(x.key, y.key));
    items = keyed.map((k) => k.item);
  }
  const end = page.limit < 0 ? undefined : page.offset + page.limit;
  return { items: items.slice(page.offset, end).map((item) => copy(item)), total: matches.length };
}

/** Reads a field by its proto name from a message whose TS properties are the lowerCamelCase names. */
export function fieldValue(item: object, protoName: string): SortValue {
  const camel = protoName.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  const value = (item as Record<string, unknown>)[camel];
  return typeof value === "string" || typeof value === "number" ? value : undefined;
}
