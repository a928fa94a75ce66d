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
import { snapshotChoices } from "../lib/snapshot-choices.js";
import { ResourceDiffs } from "./diff-view.js";

const MAX_SNAPSHOTS = 1000;

/**
 * Resources snapshots over time and a diff of any two. The store keeps each snapshot id's latest version; versions
 * published while the page is open are listed too, from WatchResources.
 */
export function ResourcesView({ a, b }: { a: string | undefined; b: string | undefined }) {
  const { clients } = useStore();
  const { latest, seen } = useLiveResources();
  const { data, error } = usePoll(
    (signal) =>
      clients.resources.queryResources({ page: { sortBy: "update_time", sortOrder: SortOrder.DESC, limit: MAX_SNAPSHOTS } }, { signal }),
    undefined,
    [clients, latest?.resourcesId, latest?.version],
  );
  const snapshots = useMemo(() => data?.resources ?? [], [data]);
  const choices = useMemo(() => snapshotChoices(snapshots, seen), [snapshots, seen]);
  const keys = [...choices.keys()];
  // Default pair: the two most recent, older on the left.
  const right = b ?? keys[0];
  const left = a ?? keys.find((key) => key !== right);
  const diffs = useMemo(() => {
    const sa = left === undefined ? undefined : choices.get(left);
    const sb = right === undefined ? undefined : choices.get(right);
    return sa || sb ? diffResources(sa?.resources, sb?.resources) : [];
  }, [choices, left, right]);
  const timeline = useMemo<ChartOption>(() => {
    const ordered = [...new Set(snapshots.map((s) => s.resourcesId))].reverse();
    const points = [
      ...snapshots.map((s) => ({ id: s.resourcesId, version: s.version, time: s.updateTime })),
      ...seen.map((s) => ({ id: s.resourcesId, version: s.version, time: s.updateTime })),
    ];
    return {
      tooltip: { renderMode: "richText", trigger: "item" },
      grid: { left: 160, right: 24, top: 8, bottom: 28 },
      xAxis: { type: "time" },
      yAxis: { type: "category", data: ordered },
      series: [
        {
          type: "scatter",
          symbolSize: 10,
          label: { show: true, position: "right", formatter: "v{@[2]}" },
          data: points.map((p) => ({ name: `${p.id} v${p.version}`, value: [p.time * 1000, p.id, p.version] })),
        },
      ],
    };
  }, [snapshots, seen]);

  return (
    <section data-testid="view-resources">
      <h2>Resources</h2>
      <ErrorBanner error={error} />
      {data === undefined && !error ? <Loading /> : null}
      <div className="panel">
        <h3>Versions over time</h3>
        <Chart
          testId="resources-timeline"
          option={timeline}
          points={snapshots.length + seen.length}
          height={Math.min(420, 80 + 24 * snapshots.length)}
        />
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
                <tr key={s.resourcesId} data-testid="resources-row" data-resources-id={s.resourcesId} data-version={s.version}>
                  <td>
                    <a href={`#/resources?a=${encodeURIComponent(right ?? "")}&b=${encodeURIComponent(s.resourcesId)}`}>{s.resourcesId}</a>
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
              <li key={`${s.resourcesId}@${s.version}`}>
                {formatTime(s.updateTime)} · {s.resourcesId} v{s.version}
              </li>
            ))}
          </ul>
        </div>
      </div>
      <div className="panel">
        <h3>Diff</h3>
        <div className="filters">
          <LabeledSelect
            label="Before"
            testId="diff-select-a"
            value={left ?? ""}
            options={keys}
            onChange={(key) => navigate({ view: "resources", a: key, ...(right ? { b: right } : {}) }, true)}
          />
          <LabeledSelect
            label="After"
            testId="diff-select-b"
            value={right ?? ""}
            options={keys}
            onChange={(key) => navigate({ view: "resources", ...(left ? { a: left } : {}), b: key }, true)}
          />
        </div>
        <div data-testid="resources-diff">
          <ResourceDiffs diffs={diffs} />
        </div>
      </div>
    </section>
  );
}
