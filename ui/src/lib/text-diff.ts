import { diffLines } from "diff";

/** One line of a side-by-side diff: the old line on the left, the new one on the right (either may be absent). */
export interface DiffRow {
  left?: { no: number; text: string; kind: "same" | "removed" };
  right?: { no: number; text: string; kind: "same" | "added" };
}

/**
 * A side-by-side line diff of two texts (jsdiff's line diff): unchanged lines face each other, and a removed block
 * followed by an added one is paired line by line, so an edited line sits beside its new version.
 */
export function sideBySide(before: string, after: string): DiffRow[] {
  const rows: DiffRow[] = [];
  let leftNo = 0;
  let rightNo = 0;
  let removed: string[] = [];
  const flushRemoved = (added: string[]) => {
    const n = Math.max(removed.length, added.length);
    for (let i = 0; i < n; i++) {
      const row: DiffRow = {};
      const l = removed[i];
      const r = added[i];
      if (l !== undefined) row.left = { no: ++leftNo, text: l, kind: "removed" };
      if (r !== undefined) row.right = { no: ++rightNo, text: r, kind: "added" };
      rows.push(row);
    }
    removed = [];
  };
  // A missing newline at the end does not make the last line differ.
  for (const change of diffLines(before, after, { ignoreNewlineAtEof: true })) {
    const lines = splitLines(change.value);
    if (change.removed) {
      removed.push(...lines);
    } else if (change.added) {
      flushRemoved(lines);
    } else {
      flushRemoved([]);
      for (const text of lines) rows.push({ left: { no: ++leftNo, text, kind: "same" }, right: { no: ++rightNo, text, kind: "same" } });
    }
  }
  flushRemoved([]);
  return rows;
}

/** Whether a diff has any change. */
export const hasChanges = (rows: readonly DiffRow[]) => rows.some((r) => r.left?.kind !== "same" || r.right?.kind !== "same");

function splitLines(value: string): string[] {
  const lines = value.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}
