import { useMemo } from "react";
import { SortOrder } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { LabeledSelect } from "../components/labeled-select.js";
import { useLiveResources } from "../components/live-resources.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { navigate } from "../components/use-route.js";
import { formatTime } from "../lib/format.js";
import { diffResources, resourceKind } from "../lib/resources-diff.js";
import { parseSnapshotKey, snapshotChoices, versionKey } from "../lib/snapshot-choices.js";
import { versionHistory } from "../lib/version-history.js";
import { ResourceDiffs } from "./diff-view.js";
import { ResourceHistory } from "./resource-history.js";

const MAX_SNAPSHOTS = 1000;
const HISTORY_PAGE = 50;

export interface ResourcesViewProps {
  /** The snapshot id whose history is shown; by default the id of `b`, else the most recently updated one. */
  id: string | undefined;
  page: number | undefined;
  a: string | undefined;
  b: string | undefined;
}

/**
 * Resources snapshots over time, the version history of one (QueryResourceVersions, newest first, paged on the
 * store) and a diff of any two versions of any ids, each read with GetResources{id, version}. With no pair given, the
 * diff is the shown id's first version against its current one: what the run changed overall; each history row diffs
 * its version against the one before.
 */
export function ResourcesView({ id, page = 0, a, b }: ResourcesViewProps) {
  const { clients } = useStore();
  const { latest, seen } = useLiveResources();
  const { data, error } = usePoll(
    (signal) =>
      clients.resources.queryResources({ page: { sortBy: "update_time", sortOrder: SortOrder.DESC, limit: MAX_SNAPSHOTS } }, { signal }),
    undefined,
    [clients, latest?.resourcesId, latest?.version],
  );
  const snapshots = useMemo(() => data?.resources ?? [], [data]);
  const historyId = id ?? (b === undefined ? snapshots[0]?.resourcesId : parseSnapshotKey(b).resourcesId);
  const current = snapshots.find((s) => s.resourcesId === historyId);

  // One more version than the page shows: the one before the page's oldest, to say what that one changed.
  const history = usePoll(
    async (signal) =>
      historyId === undefined
        ? undefined
        : clients.resources.queryResourceVersions(
            {
              resourcesId: historyId,
              page: { sortBy: "version", sortOrder: SortOrder.DESC, limit: HISTORY_PAGE + 1, offset: page * HISTORY_PAGE },
            },
            { signal },
          ),
    undefined,
    [clients, historyId, page, current?.version],
  );
  const historyData = historyId !== undefined && history.data?.resources[0]?.resourcesId === historyId ? history.data : undefined;
  const versions = useMemo(() => historyData?.resources ?? [], [historyData]);
  const entries = useMemo(() => versionHistory(versions).slice(0, HISTORY_PAGE), [versions]);

  const choices = useMemo(() => snapshotChoices(snapshots, [...versions, ...seen]), [snapshots, versions, seen]);
  const keys = [...choices.keys()];
  const [left, right] = diffPair(a, b, current, keys);
  const pair = usePoll(
    (signal) =>
      Promise.all(
        [left, right].map((key) => (key === undefined ? undefined : clients.resources.getResources(parseSnapshotKey(key), { signal }))),
      ),
    undefined,
    [clients, left, right, latest?.resourcesId, latest?.version],
  );
  const [before, after] = pair.data ?? [];
  const diffs = useMemo(() => (before || after ? diffResources(before?.resources, after?.resources) : []), [before, after]);

  const go = (change: Partial<ResourcesViewProps>, replace: boolean) => {
    const next = { id: historyId, page, a: left, b: right, ...change };
    navigate(
      {
        view: "resources",
        ...(next.id ? { id: next.id } : {}),
        ...(next.page ? { page: next.page } : {}),
        ...(next.a ? { a: next.a } : {}),
        ...(next.b ? { b: next.b } : {}),
      },
      replace,
    );
  };

  // Each version once: the ids' current versions, the history page and those seen live overlap.
  const points = useMemo(
    () =>
      new Map(
        [...snapshots, ...versions, ...seen].map((s) => [
          versionKey(s.resourcesId, s.version),
          { id: s.resourcesId, version: s.version, time: s.updateTime },
        ]),
      ),
    [snapshots, versions, seen],
  );
  const timeline = useMemo<ChartOption>(
    () => ({
      tooltip: { renderMode: "richText", trigger: "item" },
      grid: { left: 160, right: 24, top: 8, bottom: 28 },
      xAxis: { type: "time" },
      yAxis: { type: "category", data: [...new Set(snapshots.map((s) => s.resourcesId))].reverse() },
      series: [
        {
          type: "scatter",
          symbolSize: 10,
          label: { show: true, position: "right", formatter: "v{@[2]}" },
          data: [...points.values()].map((p) => ({ name: `${p.id} v${p.version}`, value: [p.time * 1000, p.id, p.version] })),
        },
      ],
    }),
    [snapshots, points],
  );

  return (
    <section data-testid="view-resources">
      <h2>Resources</h2>
      <ErrorBanner error={error ?? history.error ?? pair.error} />
      {data === undefined && !error ? <Loading /> : null}
      <div className="panel">
        <h3>Versions over time</h3>
        <Chart testId="resources-timeline" option={timeline} points={points.size} height={Math.min(420, 80 + 24 * snapshots.length)} />
      </div>
      <div className="grid2">
        <div className="panel">
          <h3>Snapshots ({snapshots.length})</h3>
          <table className="table" data-testid="resources-list">
            <thead>
              <tr>
                <th>Id</th>
                <th>Version</th>
                <th>Updated (UTC)</th>
                <th>Resources</th>
              </tr>
            </thead>
            <tbody>
              {snapshots.map((s) => (
                <tr
                  key={s.resourcesId}
                  data-testid="resources-row"
                  data-resources-id={s.resourcesId}
                  data-version={s.version}
                  aria-selected={s.resourcesId === historyId}
                >
                  <td>
                    <a href={`#/resources?id=${encodeURIComponent(s.resourcesId)}`}>{s.resourcesId}</a>
                  </td>
                  <td>{s.version}</td>
                  <td>{formatTime(s.updateTime)}</td>
                  <td className="muted">
                    {Object.entries(s.resources)
                      .map(([name, r]) => `${name}: ${resourceKind(r).replace("_", " ")}`)
                      .join(", ")}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <div className="panel" data-testid="resources-live-versions">
          <h3>Seen on WatchResources since this page opened ({seen.length})</h3>
          <ul className="plain">
            {[...seen].reverse().map((s) => (
              <li key={versionKey(s.resourcesId, s.version)}>
                {formatTime(s.updateTime)} · {s.resourcesId} v{s.version}
              </li>
            ))}
          </ul>
        </div>
      </div>
      {historyId === undefined ? null : (
        <ResourceHistory
          resourcesId={historyId}
          entries={entries}
          total={historyData?.page?.total ?? 0}
          page={page}
          size={HISTORY_PAGE}
          a={left}
          b={right}
          onPage={(n) => go({ page: n }, false)}
          onPick={(ka, kb) => go({ a: ka, b: kb }, false)}
        />
      )}
      <div className="panel">
        <h3>Diff</h3>
        <div className="filters">
          <LabeledSelect label="Before" testId="diff-select-a" value={left ?? ""} options={keys} onChange={(key) => go({ a: key }, true)} />
          <LabeledSelect label="After" testId="diff-select-b" value={right ?? ""} options={keys} onChange={(key) => go({ b: key }, true)} />
        </div>
        <div
          data-testid="resources-diff"
          data-a={before ? versionKey(before.resourcesId, before.version) : undefined}
          data-b={after ? versionKey(after.resourcesId, after.version) : undefined}
        >
          {before && after ? (
            <p className="muted">
              {before.resourcesId} v{before.version} ({formatTime(before.updateTime)}) → {after.resourcesId} v{after.version} (
              {formatTime(after.updateTime)})
            </p>
          ) : null}
          <ResourceDiffs diffs={diffs} />
        </div>
      </div>
    </section>
  );
}

/**
 * The keys diffed: those given; else, when the shown id has several versions, its first against its current one; else
 * the two newest keys, older on the left.
 */
function diffPair(
  a: string | undefined,
  b: string | undefined,
  chosen: { resourcesId: string; version: number } | undefined,
  keys: readonly string[],
): [string | undefined, string | undefined] {
  if (a === undefined && b === undefined && chosen !== undefined && chosen.version > 1) {
    return [versionKey(chosen.resourcesId, 1), versionKey(chosen.resourcesId, chosen.version)];
  }
  const right = b ?? keys[0];
  return [a ?? keys.find((key) => key !== right), right];
}
