import { formatCount, formatTime } from "../lib/format.js";
import { pageWindow } from "../lib/rollout-filter.js";
import { versionKey } from "../lib/snapshot-choices.js";
import type { VersionEntry } from "../lib/version-history.js";

export interface ResourceHistoryProps {
  resourcesId: string;
  /** The versions of this page, newest first. */
  entries: VersionEntry[];
  /** How many versions the id has. */
  total: number;
  page: number;
  size: number;
  /** The diffed pair's keys, to mark the versions chosen. */
  a: string | undefined;
  b: string | undefined;
  onPage: (page: number) => void;
  onPick: (a: string, b: string) => void;
}

/** Every version of one snapshot id, a page at a time, with what each changed and buttons to diff any two. */
export function ResourceHistory({ resourcesId, entries, total, page, size, a, b, onPage, onPick }: ResourceHistoryProps) {
  const range = pageWindow({ page, size }, total);
  return (
    <div className="panel" data-testid="resources-history" data-resources-id={resourcesId}>
      <h3>
        History of {resourcesId} ({formatCount(total)} versions)
      </h3>
      <div className="filters">
        <button type="button" data-testid="history-page-prev" disabled={page === 0} onClick={() => onPage(page - 1)}>
          ‹ Newer
        </button>
        <span data-testid="history-page-info">
          {formatCount(range.from)}–{formatCount(range.to)} of {formatCount(range.total)}
        </span>
        <button type="button" data-testid="history-page-next" disabled={page + 1 >= range.pages} onClick={() => onPage(page + 1)}>
          Older ›
        </button>
      </div>
      <table className="table">
        <thead>
          <tr>
            <th>Version</th>
            <th>Created (UTC)</th>
            <th>Published (UTC)</th>
            <th>Changed against the previous version</th>
            <th>Diff</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((entry) => {
            const key = versionKey(resourcesId, entry.version);
            return (
              <tr key={entry.version} data-testid="history-row" data-version={entry.version}>
                <td>v{entry.version}</td>
                <td>{formatTime(entry.createTime)}</td>
                <td>{formatTime(entry.updateTime)}</td>
                <td data-testid="history-changes">
                  {entry.changes === undefined ? (
                    <span className="muted">(previous version on the next page)</span>
                  ) : entry.changes.length === 0 ? (
                    <span className="muted">nothing</span>
                  ) : (
                    <span className="chips">
                      {entry.changes.map((c) => (
                        <span
                          key={c.name}
                          className={`chip ${c.change}`}
                          data-testid="history-change"
                          data-name={c.name}
                          data-change={c.change}
                        >
                          {c.name}
                        </span>
                      ))}
                    </span>
                  )}
                </td>
                <td>
                  <button type="button" data-testid="history-pick-a" aria-pressed={a === key} onClick={() => onPick(key, b ?? key)}>
                    A
                  </button>{" "}
                  <button type="button" data-testid="history-pick-b" aria-pressed={b === key} onClick={() => onPick(a ?? key, key)}>
                    B
                  </button>{" "}
                  {entry.version > 1 ? (
                    <button
                      type="button"
                      className="link"
                      data-testid="history-vs-previous"
                      onClick={() => onPick(versionKey(resourcesId, entry.version - 1), key)}
                    >
                      vs previous
                    </button>
                  ) : null}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
