import { useMemo } from "react";
import { RolloutMode, SortOrder } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { LabeledSelect } from "../components/labeled-select.js";
import { useLiveResources } from "../components/live-resources.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { navigate } from "../components/use-route.js";
import { formatCount, formatReward } from "../lib/format.js";
import { bandSeries, pointsByVersion, type VersionPoint } from "../lib/training.js";

const POLL_MS = 5000;

/**
 * Training progress of one resources snapshot id (the RL loop publishes one version per step): reward per version
 * with its spread, over time, validation score, tokens per call. Grows live as versions and rollouts arrive.
 */
export function TrainingView({ resourcesId }: { resourcesId: string | undefined }) {
  const { clients } = useStore();
  const { latest } = useLiveResources();
  const ids = usePoll(
    (signal) => clients.resources.queryResources({ page: { sortBy: "update_time", sortOrder: SortOrder.DESC, limit: 1000 } }, { signal }),
    undefined,
    [clients, latest?.resourcesId, latest?.version],
  );
  const choices = (ids.data?.resources ?? []).filter((r) => !r.resourcesId.startsWith("apo-")).map((r) => r.resourcesId);
  const selected = resourcesId ?? (latest && !latest.resourcesId.startsWith("apo-") ? latest.resourcesId : choices[0]);
  const version = latest?.resourcesId === selected ? latest?.version : ids.data?.resources.find((r) => r.resourcesId === selected)?.version;
  const { data, error } = usePoll(
    async (signal) =>
      selected === undefined ? undefined : (await clients.store.getRewardsByResources({ resourcesIdIn: [selected] }, { signal })).stats,
    POLL_MS,
    [clients, selected, latest?.version],
  );
  const train = useMemo(() => pointsByVersion(data ?? [], RolloutMode.TRAIN), [data]);
  const val = useMemo(() => pointsByVersion(data ?? [], RolloutMode.VAL), [data]);
  const last = train.findLast((p) => p.mean !== undefined);

  return (
    <section data-testid="view-training">
      <h2>Training</h2>
      <ErrorBanner error={error ?? ids.error} />
      <div className="filters">
        <LabeledSelect
          label="Resources"
          testId="training-resources-select"
          value={selected ?? ""}
          options={choices}
          onChange={(id) => navigate({ view: "training", resourcesId: id }, true)}
        />
      </div>
      {selected === undefined ? (
        <p className="muted">No resources have been published yet.</p>
      ) : data === undefined && !error ? (
        <Loading />
      ) : (
        <>
          <p className="summary" data-testid="training-summary">
            {train.length} versions trained on · {formatCount(train.reduce((n, p) => n + p.rollouts, 0))} train rollouts ·{" "}
            {formatCount(val.reduce((n, p) => n + p.rollouts, 0))} validation rollouts · latest version{" "}
            {version === undefined ? "—" : `v${version}`} · last mean reward {formatReward(last?.mean)}
          </p>
          <div className="grid2">
            <RewardChart testId="training-reward-by-version" title="Train reward per version (mean ± std)" points={train} x="version" />
            <RewardChart testId="training-reward-by-step" title="Train reward per step, over time" points={train} x="time" />
            <RewardChart testId="training-val-chart" title="Validation reward per version" points={val} x="version" />
            <TokensChart points={train} />
          </div>
        </>
      )}
    </section>
  );
}

function RewardChart({ testId, title, points, x }: { testId: string; title: string; points: VersionPoint[]; x: "version" | "time" }) {
  const option = useMemo<ChartOption>(() => {
    const band = bandSeries(points, x === "version" ? (p) => p.version : (p) => p.time * 1000);
    return {
      legend: { data: ["mean"] },
      grid: { left: 48, right: 16, top: 48, bottom: 32 },
      xAxis: x === "version" ? { type: "value", name: "version", minInterval: 1, min: "dataMin", max: "dataMax" } : { type: "time" },
      yAxis: { type: "value", name: "reward", scale: true },
      series: [
        // "all": the band stacks on a negative lower bound too (the default stacks same-sign values only).
        {
          name: "lower",
          type: "line",
          data: band.lower,
          stack: "band",
          stackStrategy: "all",
          lineStyle: { opacity: 0 },
          symbol: "none",
          silent: true,
        },
        {
          name: "± std",
          type: "line",
          data: band.spread,
          stack: "band",
          stackStrategy: "all",
          lineStyle: { opacity: 0 },
          areaStyle: { opacity: 0.2 },
          symbol: "none",
          silent: true,
        },
        { name: "mean", type: "line", data: band.mean, showSymbol: true },
      ],
      tooltip: { renderMode: "richText", trigger: "axis" },
    };
  }, [points, x]);
  return (
    <div className="panel">
      <h3>{title}</h3>
      <Chart testId={testId} option={option} points={points.filter((p) => p.mean !== undefined).length} />
    </div>
  );
}

function TokensChart({ points }: { points: VersionPoint[] }) {
  const option = useMemo<ChartOption>(() => {
    const withCalls = points.filter((p) => p.promptTokensPerCall !== undefined);
    return {
      legend: {},
      grid: { left: 56, right: 16, top: 48, bottom: 32 },
      xAxis: { type: "value", name: "version", minInterval: 1, min: "dataMin", max: "dataMax" },
      yAxis: { type: "value", name: "tokens / call" },
      series: [
        { name: "prompt", type: "line", data: withCalls.map((p) => [p.version, p.promptTokensPerCall]) },
        { name: "response", type: "line", data: withCalls.map((p) => [p.version, p.responseTokensPerCall]) },
      ],
    };
  }, [points]);
  return (
    <div className="panel">
      <h3>Tokens per LLM call</h3>
      <Chart testId="training-tokens-chart" option={option} points={points.filter((p) => p.promptTokensPerCall !== undefined).length} />
    </div>
  );
}
