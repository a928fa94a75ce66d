import { useMemo } from "react";
import { SortOrder } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { useLiveResources } from "../components/live-resources.js";
import { statusColor, StatusBadge } from "../components/status-badge.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";

import { formatAgo, formatCount, formatTime } from "../lib/format.js";
import { ROLLOUT_MODE_NAMES, ROLLOUT_STATUS_NAMES, statusNameOfStatisticsKey, workerStatusName } from "../lib/names.js";
import { countsByMode, niceBucketSeconds, seriesByStatus } from "../lib/timeline.js";
import { formatRoute, resourcesVersionRoute } from "../lib/url-state.js";

const POLL_MS = 2000;

/** Counts, throughput, queue, workers and the latest resources, refreshed every two seconds. */
export function OverviewView() {
  const { clients } = useStore();
  const { latest } = useLiveResources();
  const { data, error } = usePoll(
    async (signal) => {
      const [stats, whole, workers] = await Promise.all([
        clients.store.getStatistics({}, { signal }),
        clients.store.getRolloutTimeline({}, { signal }),
        clients.store.queryWorkers({ page: { sortBy: "last_heartbeat_time", sortOrder: SortOrder.DESC, limit: 200 } }, { signal }),
      ]);
      // Throughput over the store's whole history, in at most 60 readable buckets.
      const range = Math.max(1, whole.endTime - whole.startTime);
      const timeline = await clients.store.getRolloutTimeline(
        { startTime: whole.startTime, endTime: whole.endTime, bucketSeconds: niceBucketSeconds(range) },
        { signal },
      );
      return { stats, whole, timeline, workers: workers.workers, now: Date.now() / 1000 };
    },
    POLL_MS,
    [clients],
  );

  const byStatus = useMemo(() => {
    const counts = Object.fromEntries(ROLLOUT_STATUS_NAMES.map((s) => [s, 0])) as Record<string, number>;
    for (const [key, n] of Object.entries(data?.stats.rolloutsByStatus ?? {})) {
      const name = statusNameOfStatisticsKey(key);
      if (name !== undefined) counts[name] = n;
    }
    return counts;
  }, [data?.stats]);
  const byMode = useMemo(() => (data ? countsByMode(data.whole) : undefined), [data]);
  const throughput = useMemo<{ option: ChartOption; points: number }>(() => {
    if (!data) return { option: {}, points: 0 };
    const finished = seriesByStatus(data.timeline, "finished");
    const created = seriesByStatus(data.timeline, "created");
    const createdTotal = [...created.values()].reduce<[number, number][]>(
      (acc, series) => series.map(([t, n], i) => [t * 1000, n + (acc[i]?.[1] ?? 0)]),
      [],
    );
    const series = [...finished.entries()].map(([status, points]) => ({
      name: `finished ${status}`,
      type: "bar",
      stack: "finished",
      itemStyle: { color: statusColor(status) },
      data: points.map(([t, n]) => [t * 1000, n]),
    }));
    return {
      option: {
        legend: {},
        grid: { left: 48, right: 16, top: 48, bottom: 32 },
        xAxis: { type: "time" },
        yAxis: { type: "value", name: `per ${data.timeline.bucketSeconds} s` },
        series: [...series, { name: "created", type: "line", data: createdTotal, showSymbol: false }],
      },
      points: data.timeline.bucketCount,
    };
  }, [data]);
  const statusChart = useMemo<ChartOption>(
    () => ({
      grid: { left: 48, right: 16, top: 16, bottom: 32 },
      xAxis: { type: "category", data: ROLLOUT_STATUS_NAMES, axisLabel: { interval: 0, fontSize: 10 } },
      yAxis: { type: "value" },
      series: [{ type: "bar", data: ROLLOUT_STATUS_NAMES.map((s) => ({ value: byStatus[s], itemStyle: { color: statusColor(s) } })) }],
    }),
    [byStatus],
  );

  return (
    <section data-testid="view-overview">
      <h2>Overview</h2>
      <ErrorBanner error={error} />
      {data === undefined ? (
        error ? null : (
          <Loading />
        )
      ) : (
        <>
          <div className="cards">
            <Card label="Rollouts" testId="overview-total-rollouts" value={formatCount(data.stats.totalRollouts)} />
            <Card label="Queue depth" testId="overview-queue-depth" value={formatCount(data.stats.queueLength)} />
            <Card label="Workers" testId="overview-total-workers" value={formatCount(data.stats.totalWorkers)} />
            <Card label="Spans" testId="overview-total-spans" value={formatCount(data.stats.totalSpans)} />
            <div className="card" data-testid="overview-latest-resources">
              <div className="card-label">Latest resources</div>
              {latest === undefined ? (
                <div className="card-value">none</div>
              ) : (
                <div className="card-value small">
                  <a href={formatRoute(resourcesVersionRoute(latest.resourcesId, latest.version))} data-testid="latest-resources-id">
                    {latest.resourcesId}
                  </a>{" "}
                  v<span data-testid="latest-resources-version">{latest.version}</span>
                  <div className="muted">{formatTime(latest.updateTime)}</div>
                </div>
              )}
            </div>
          </div>
          <div className="grid2">
            <div className="panel">
              <h3>By status</h3>
              <div className="counts" data-testid="overview-status-counts">
                {ROLLOUT_STATUS_NAMES.map((s) => (
                  <a key={s} href={`#/rollouts?status=${s}`} className="count">
                    <StatusBadge status={s} /> <span data-testid={`status-count-${s}`}>{formatCount(byStatus[s] ?? 0)}</span>
                  </a>
                ))}
              </div>
              <Chart testId="overview-status-chart" option={statusChart} points={ROLLOUT_STATUS_NAMES.length} height={200} />
            </div>
            <div className="panel">
              <h3>By mode</h3>
              <div className="counts" data-testid="overview-mode-counts">
                {ROLLOUT_MODE_NAMES.map((m) => (
                  <a key={m} href={`#/rollouts?mode=${m}`} className="count">
                    {m} <span data-testid={`mode-count-${m}`}>{formatCount(byMode?.[m] ?? 0)}</span>
                  </a>
                ))}
              </div>
              <h3>Throughput</h3>
              <Chart testId="overview-throughput-chart" option={throughput.option} points={throughput.points} height={220} />
            </div>
          </div>
          <div className="panel">
            <h3>Workers</h3>
            <table className="table" data-testid="overview-workers">
              <thead>
                <tr>
                  <th>Worker</th>
                  <th>Status</th>
                  <th>Last heartbeat</th>
                  <th>Current rollout</th>
                </tr>
              </thead>
              <tbody>
                {data.workers.map((w) => (
                  <tr key={w.workerId} data-testid="worker-row" data-worker-id={w.workerId}>
                    <td>{w.workerId}</td>
                    <td data-testid="worker-status">
                      <StatusBadge status={workerStatusName(w.status)} />
                    </td>
                    <td data-testid="worker-heartbeat" title={formatTime(w.lastHeartbeatTime)}>
                      {formatAgo(w.lastHeartbeatTime, data.now)}
                    </td>
                    <td>
                      {w.currentRolloutId ? <a href={`#/rollouts/${encodeURIComponent(w.currentRolloutId)}`}>{w.currentRolloutId}</a> : "—"}
                    </td>
                  </tr>
                ))}
                {data.workers.length === 0 ? (
                  <tr>
                    <td colSpan={4} className="muted">
                      No workers have reported yet.
                    </td>
                  </tr>
                ) : null}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

function Card({ label, value, testId }: { label: string; value: string; testId: string }) {
  return (
    <div className="card">
      <div className="card-label">{label}</div>
      <div className="card-value" data-testid={testId}>
        {value}
      </div>
    </div>
  );
}
