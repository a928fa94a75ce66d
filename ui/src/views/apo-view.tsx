import { useMemo, useState } from "react";
import { RolloutMode } from "../../../src/gen/agl/v1/types_pb.js";
import { Chart, type ChartOption } from "../components/chart.js";
import { ErrorBanner, Loading } from "../components/error-banner.js";
import { LabeledSelect } from "../components/labeled-select.js";
import { useLiveResources } from "../components/live-resources.js";
import { useStore } from "../components/store-context.js";
import { usePoll } from "../components/use-poll.js";
import { navigate } from "../components/use-route.js";
import { formatReward, truncate } from "../lib/format.js";
import { type ApoRun, candidateTree, readApoRuns } from "../lib/apo-runs.js";
import { sideBySide } from "../lib/text-diff.js";
import { SideBySide } from "./diff-view.js";

const POLL_MS = 5000;

/** APO runs, read from the snapshots APO publishes (`apo-{run}-…` with its `_apo` record) and their val scores. */
export function ApoView({ runId }: { runId: string | undefined }) {
  const { clients } = useStore();
  const { latest } = useLiveResources();
  const snapshots = usePoll(
    (signal) => clients.resources.queryResources({ resourcesIdContains: "apo-", page: { limit: 5000 } }, { signal }),
    undefined,
    [clients, latest?.resourcesId, latest?.version],
  );
  const runs = useMemo(() => readApoRuns(snapshots.data?.resources ?? []), [snapshots.data]);
  const run = runs.find((r) => r.run === runId) ?? runs.at(-1);
  const candidateIds = useMemo(() => run?.candidates.map((c) => c.resourcesId) ?? [], [run]);
  const scores = usePoll(
    async (signal) => {
      if (candidateIds.length === 0) return new Map<string, number>();
      const { stats } = await clients.store.getRewardsByResources({ resourcesIdIn: candidateIds, modeIn: [RolloutMode.VAL] }, { signal });
      const byId = new Map<string, number>();
      for (const s of stats) if (s.mean !== undefined) byId.set(s.resourcesId, s.mean);
      return new Map(run?.candidates.flatMap((c) => (byId.has(c.resourcesId) ? [[c.key, byId.get(c.resourcesId) as number]] : [])));
    },
    POLL_MS,
    [clients, candidateIds.join("\n")],
  );

  return (
    <section data-testid="view-apo">
      <h2>APO runs</h2>
      <ErrorBanner error={snapshots.error ?? scores.error} />
      {snapshots.data === undefined && !snapshots.error ? <Loading /> : null}
      {snapshots.data !== undefined && runs.length === 0 ? (
        <p className="muted">No APO run has published candidates in this store.</p>
      ) : null}
      {run === undefined ? null : (
        <>
          <div className="filters">
            <LabeledSelect
              label="Run"
              testId="apo-run-select"
              value={run.run}
              options={runs.map((r) => r.run)}
              onChange={(id) => navigate({ view: "apo", runId: id }, true)}
            />
            <span className="muted">
              {run.candidates.length} candidates · best{" "}
              {run.best ? `${run.best.candidate} (${formatReward(run.best.score)}, round ${run.best.round})` : "—"}
            </span>
          </div>
          <RunDetail run={run} scores={scores.data ?? new Map()} />
        </>
      )}
    </section>
  );
}

function RunDetail({ run, scores }: { run: ApoRun; scores: ReadonlyMap<string, number> }) {
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const tree = useMemo<ChartOption>(
    () => ({
      tooltip: { renderMode: "richText", trigger: "item" },
      series: [
        {
          type: "tree",
          data: [candidateTree(run, scores)],
          top: 16,
          bottom: 16,
          left: 110,
          right: 130,
          symbolSize: 10,
          initialTreeDepth: -1,
          expandAndCollapse: false,
          label: {
            position: "left",
            verticalAlign: "middle",
            align: "right",
            formatter: (p: { name: string; value?: number }) => labelOf(p),
          },
          leaves: { label: { position: "right", align: "left" } },
        },
      ],
    }),
    [run, scores],
  );
  const rounds = useMemo<ChartOption>(() => {
    const points = run.candidates.flatMap((c) =>
      scores.has(c.key) ? [{ name: c.key, value: [c.round, scores.get(c.key) as number] }] : [],
    );
    const bestByRound: [number, number][] = [];
    let best = Number.NEGATIVE_INFINITY;
    for (const round of [...new Set(run.candidates.map((c) => c.round))].sort((a, b) => a - b)) {
      for (const c of run.candidates) if (c.round === round && scores.has(c.key)) best = Math.max(best, scores.get(c.key) as number);
      if (Number.isFinite(best)) bestByRound.push([round, best]);
    }
    return {
      legend: {},
      tooltip: { renderMode: "richText", trigger: "item" },
      grid: { left: 48, right: 16, top: 48, bottom: 32 },
      xAxis: { type: "value", name: "round", minInterval: 1 },
      yAxis: { type: "value", name: "val reward", scale: true },
      series: [
        { name: "candidates", type: "scatter", data: points },
        { name: "best so far", type: "line", step: "end", data: bestByRound },
      ],
    };
  }, [run, scores]);
  const candidate = run.candidates.find((c) => c.key === selected);
  const bestTemplates = run.best?.templates ?? {};
  const seedTemplates = run.seed?.templates ?? {};
  const names = [...new Set([...Object.keys(seedTemplates), ...Object.keys(bestTemplates)])].sort();
  const scored = run.candidates.filter((c) => scores.has(c.key)).length;

  return (
    <>
      <div className="grid2">
        <div className="panel">
          <h3>Candidate tree</h3>
          <Chart testId="apo-tree" option={tree} points={run.candidates.length} height={Math.max(260, 28 * run.candidates.length)} />
        </div>
        <div className="panel">
          <h3>Scores per round</h3>
          <Chart testId="apo-scores-chart" option={rounds} points={scored} />
        </div>
      </div>
      <div className="panel">
        <h3>Candidates</h3>
        <table className="table" data-testid="apo-candidates">
          <thead>
            <tr>
              <th>Candidate</th>
              <th>Round</th>
              <th>Parent</th>
              <th>Edited</th>
              <th>Val score</th>
              <th>Critique</th>
            </tr>
          </thead>
          <tbody>
            {run.candidates.map((c) => (
              <tr
                key={c.key}
                data-testid="apo-candidate"
                data-candidate={c.key}
                data-parent={c.parent ?? ""}
                data-round={c.round}
                className={c.key === selected ? "selected" : undefined}
              >
                <td>
                  <button type="button" className="link" onClick={() => setSelected(c.key)}>
                    {c.key}
                  </button>
                </td>
                <td>{c.round}</td>
                <td>{c.parent ?? "—"}</td>
                <td>{c.rejected ? `rejected: ${c.rejected}` : (c.target ?? "—")}</td>
                <td>{formatReward(scores.get(c.key))}</td>
                <td className="muted">{truncate(c.critique ?? "", 120)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {candidate === undefined ? null : (
          <div className="panel" data-testid="apo-critique">
            <h4>{candidate.key}: critique</h4>
            <pre className="msg-text">{candidate.critique ?? "(none: the seed)"}</pre>
            {Object.entries(candidate.templates).map(([name, text]) => (
              <div key={name}>
                <h4>{name}</h4>
                <pre className="msg-text">{text}</pre>
              </div>
            ))}
          </div>
        )}
      </div>
      <div className="panel" data-testid="apo-best-diff">
        <h3>Best ({run.best?.candidate ?? "—"}) against the seed</h3>
        {names.map((name) => (
          <div key={name}>
            <h4>{name}</h4>
            <SideBySide name={name} rows={sideBySide(seedTemplates[name] ?? "", bestTemplates[name] ?? "")} />
          </div>
        ))}
      </div>
    </>
  );
}

function labelOf(p: { name: string; value?: number }): string {
  return typeof p.value === "number" ? `${p.name} (${p.value.toFixed(2)})` : p.name;
}
